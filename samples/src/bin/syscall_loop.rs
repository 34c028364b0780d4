//! Load generator for the live benchmark: a cheap system call (`getppid`) in a tight loop.
//!
//! ```text
//! syscall_loop [--threads T] [--iterations N | --seconds S] [--wait-signal]
//! ```
//! Starts T worker threads (default 1) and prints one JSON line
//! `{"ready":"syscall_loop","pid":P,"tids":[..],"getppid_nr":110}` once they exist, so a
//! recorder can attach with a filter on exactly those threads (`common_pid` of a trace
//! event is the thread id). With `--wait-signal` it then waits for SIGUSR1 before the
//! threads start calling; otherwise they start at once. Together the threads make N calls
//! (default 1,000,000; thread `t` makes its share N/T, the first N%T make one more), or
//! call until S seconds have passed. No allocation and no other system call happens in the
//! loop. At the end it prints
//! `{"done":"syscall_loop","threads":T,"calls":C,"per_thread":[..],"elapsed_ns":E,"per_sec":R}`
//! where the rate is all calls over the wall-clock time from the start signal until the
//! last thread finished. Bad arguments: a message on stderr and exit status 2.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

/// How long the threads run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Amount {
    /// This many calls in total.
    Iterations(u64),
    /// Calls until this much time has passed.
    Seconds(f64),
}

/// The command line.
#[derive(Debug, Clone, PartialEq)]
struct Args {
    threads: u32,
    amount: Amount,
    wait_signal: bool,
}

const USAGE: &str =
    "usage: syscall_loop [--threads T] [--iterations N | --seconds S] [--wait-signal]";

/// Parse the arguments (without the program name).
fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Args, String> {
    let mut parsed = Args {
        threads: 1,
        amount: Amount::Iterations(1_000_000),
        wait_signal: false,
    };
    let mut amount_given = false;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value; {USAGE}"))
        };
        match arg.as_str() {
            "--threads" => {
                let v = value("--threads")?;
                parsed.threads = match v.parse::<u32>() {
                    Ok(t) if (1..=1024).contains(&t) => t,
                    _ => return Err(format!("--threads {v:?}: give a number from 1 to 1024")),
                };
            }
            "--iterations" | "--seconds" if amount_given => {
                return Err(format!(
                    "give only one of --iterations and --seconds; {USAGE}"
                ));
            }
            "--iterations" => {
                let v = value("--iterations")?;
                let n = v
                    .parse::<u64>()
                    .map_err(|_| format!("--iterations {v:?}: give a whole number"))?;
                parsed.amount = Amount::Iterations(n);
                amount_given = true;
            }
            "--seconds" => {
                let v = value("--seconds")?;
                match v.parse::<f64>() {
                    Ok(s) if s.is_finite() && s > 0.0 && s < 1e6 => {
                        parsed.amount = Amount::Seconds(s);
                    }
                    _ => return Err(format!("--seconds {v:?}: give a positive number")),
                }
                amount_given = true;
            }
            "--wait-signal" => parsed.wait_signal = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    Ok(parsed)
}

/// Thread `t`'s share of `total` calls among `threads`.
fn share(total: u64, threads: u32, t: u32) -> u64 {
    total / u64::from(threads) + u64::from(u64::from(t) < total % u64::from(threads))
}

/// One real `getppid` system call (through `syscall(2)`, so no library can cache it).
#[inline(always)]
fn one_call() {
    // SAFETY: getppid takes no arguments, cannot fail and touches no memory of ours.
    unsafe {
        libc::syscall(libc::SYS_getppid);
    }
}

/// A worker: report its thread id, wait for the start, call, return its count.
fn worker(
    amount: Amount,
    my_calls: u64,
    stop: &AtomicBool,
    start: &Barrier,
    tid_tx: mpsc::Sender<i32>,
) -> u64 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // The receiver lives in main until every thread reported.
    let _ = tid_tx.send(tid);
    drop(tid_tx);
    start.wait();
    match amount {
        Amount::Iterations(_) => {
            for _ in 0..my_calls {
                one_call();
            }
            my_calls
        }
        Amount::Seconds(_) => {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                one_call();
                n += 1;
            }
            n
        }
    }
}

/// Block SIGUSR1 in this thread (and so in every thread it starts later).
fn block_sigusr1() -> libc::sigset_t {
    // SAFETY: plain signal-set manipulation on a local, zeroed sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Wait until SIGUSR1 arrives (it is blocked, so sigwait takes it).
fn wait_sigusr1(set: &libc::sigset_t) {
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` is a valid initialised signal set, `sig` a valid out-pointer.
        let rc = unsafe { libc::sigwait(set, &mut sig) };
        if rc == 0 && sig == libc::SIGUSR1 {
            return;
        }
    }
}

fn json_list(values: &[impl std::fmt::Display]) -> String {
    let items: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("[{}]", items.join(","))
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout is the caller's choice; nothing useful to do about it.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            let _ = writeln!(std::io::stderr(), "syscall_loop: {msg}");
            std::process::exit(2);
        }
    };
    let sigset = block_sigusr1();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(args.threads as usize + 1));
    let (tid_tx, tid_rx) = mpsc::channel();
    let total = match args.amount {
        Amount::Iterations(n) => n,
        Amount::Seconds(_) => 0,
    };
    let handles: Vec<_> = (0..args.threads)
        .map(|t| {
            let (stop, start, tid_tx) = (Arc::clone(&stop), Arc::clone(&start), tid_tx.clone());
            let amount = args.amount;
            let my_calls = share(total, args.threads, t);
            std::thread::spawn(move || worker(amount, my_calls, &stop, &start, tid_tx))
        })
        .collect();
    drop(tid_tx);
    let mut tids: Vec<i32> = tid_rx.iter().collect();
    tids.sort_unstable();
    print_line(&format!(
        "{{\"ready\":\"syscall_loop\",\"pid\":{},\"tids\":{},\"getppid_nr\":{}}}",
        std::process::id(),
        json_list(&tids),
        libc::SYS_getppid
    ));
    if args.wait_signal {
        wait_sigusr1(&sigset);
    }
    start.wait();
    let t0 = Instant::now();
    if let Amount::Seconds(s) = args.amount {
        std::thread::sleep(Duration::from_secs_f64(s));
        stop.store(true, Ordering::Relaxed);
    }
    let per_thread: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap_or(0)).collect();
    let elapsed = t0.elapsed();
    let calls: u64 = per_thread.iter().sum();
    let per_sec = (calls as f64 / elapsed.as_secs_f64().max(1e-9)).round() as u64;
    print_line(&format!(
        "{{\"done\":\"syscall_loop\",\"threads\":{},\"calls\":{calls},\"per_thread\":{},\"elapsed_ns\":{},\"per_sec\":{per_sec}}}",
        args.threads,
        json_list(&per_thread),
        elapsed.as_nanos()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults_and_flags() {
        assert_eq!(
            parse(""),
            Ok(Args {
                threads: 1,
                amount: Amount::Iterations(1_000_000),
                wait_signal: false
            })
        );
        assert_eq!(
            parse("--threads 2 --seconds 1.5 --wait-signal"),
            Ok(Args {
                threads: 2,
                amount: Amount::Seconds(1.5),
                wait_signal: true
            })
        );
        assert_eq!(
            parse("--iterations 7").map(|a| a.amount),
            Ok(Amount::Iterations(7))
        );
    }

    #[test]
    fn bad_arguments_say_what_to_give() {
        assert!(parse("--threads 0").unwrap_err().contains("1 to 1024"));
        assert!(parse("--threads").unwrap_err().contains("needs a value"));
        assert!(parse("--seconds -1").unwrap_err().contains("positive"));
        assert!(parse("--seconds nan").unwrap_err().contains("positive"));
        assert!(
            parse("--iterations 5 --seconds 1")
                .unwrap_err()
                .contains("only one")
        );
        assert!(parse("--bogus").unwrap_err().contains("unknown argument"));
    }

    #[test]
    fn shares_add_up() {
        for (total, threads) in [(0u64, 1u32), (10, 3), (1_000_001, 2), (5, 8)] {
            let sum: u64 = (0..threads).map(|t| share(total, threads, t)).sum();
            assert_eq!(sum, total, "total {total} threads {threads}");
        }
        assert_eq!(share(10, 3, 0), 4);
        assert_eq!(share(10, 3, 2), 3);
    }
}
