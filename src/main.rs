fn main() {
    std::process::exit(uevrec::cli::main());
}
