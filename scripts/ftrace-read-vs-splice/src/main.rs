//! `ftrace-read-vs-splice MODE INSTANCE_DIR CPUS STOP_FILE`: one thread per CPU takes
//! every page of `per_cpu/cpuN/trace_pipe_raw` (MODE `read`: read(2) into a buffer;
//! `splice`: splice(2) into a pipe, then read(2) from the pipe), waking in poll(2), until
//! STOP_FILE exists and the rings are empty; prints the pages and bytes taken. Its CPU
//! time is measured from outside (run.sh).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

fn reader(mode: &str, dir: &str, cpu: usize, stop: &str) -> (u64, u64) {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("{dir}/per_cpu/cpu{cpu}/trace_pipe_raw"))
        .expect("trace_pipe_raw");
    let mut buf = vec![0u8; 4096];
    let mut p = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `p`.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
    let (mut pages, mut bytes, mut stopping) = (0u64, 0u64, false);
    loop {
        if !stopping {
            let mut pfd = libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 100) };
        }
        let mut got = false;
        loop {
            let n = if mode == "read" {
                match f.read(&mut buf) {
                    Ok(n) if n > 0 => n as isize,
                    _ => -1,
                }
            } else {
                // SAFETY: splice between two open descriptors, no offsets.
                let n = unsafe {
                    libc::splice(
                        f.as_raw_fd(),
                        std::ptr::null_mut(),
                        p[1],
                        std::ptr::null_mut(),
                        4096,
                        libc::SPLICE_F_NONBLOCK,
                    )
                };
                if n > 0 {
                    // SAFETY: reads at most buf.len() bytes into buf.
                    unsafe { libc::read(p[0], buf.as_mut_ptr().cast(), buf.len()) };
                }
                n
            };
            if n <= 0 {
                break;
            }
            got = true;
            pages += 1;
            bytes += n as u64;
        }
        if stopping && !got {
            return (pages, bytes);
        }
        stopping = Path::new(stop).exists();
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let cpus: usize = a[3].parse().expect("CPUS");
    let hs: Vec<_> = (0..cpus)
        .map(|cpu| {
            let (mode, dir, stop) = (a[1].clone(), a[2].clone(), a[4].clone());
            std::thread::spawn(move || reader(&mode, &dir, cpu, &stop))
        })
        .collect();
    let (mut pages, mut bytes) = (0, 0);
    for h in hs {
        let (p, b) = h.join().unwrap();
        pages += p;
        bytes += b;
    }
    println!("{{\"pages\":{pages},\"bytes\":{bytes}}}");
}
