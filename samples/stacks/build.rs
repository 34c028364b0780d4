//! Builds `src/chain.c` (outer → middle → inner → writev) into a static library with
//! frame pointers, unwind tables and debug information, at -O1 whatever the profile, so
//! its frames are the same in debug and release builds.

fn main() {
    println!("cargo::rerun-if-changed=src/chain.c");
    cc::Build::new()
        .file("src/chain.c")
        .opt_level(1)
        .debug(true)
        .flag("-fno-omit-frame-pointer")
        .flag("-fasynchronous-unwind-tables")
        .compile("chain");
}
