//! One symbolizer for all the stack writers of a run (a recording's formatter workers, a
//! decode's threads). blazesym's symbolizer is not `Send`, so with several writers it
//! lives on a thread of its own, `uevrec-symbols`, which answers their look-ups; a writer
//! alone names frames on its own thread (no round trip). The kernel's names and each
//! file's debug information are then loaded once, not once per worker: with libc6-dbg
//! installed each worker loaded ≈ 48 MB and spent ≈ 0.11 s of CPU on its own copy
//! (BENCHMARKS.md, "one symbolizer for all workers"). A writer keeps its own cache of named
//! frames, so only a frame it has not named yet crosses to the thread.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crossbeam_channel::Sender;

use super::symbols::{self, Resolved};

/// How a writer's frames are named.
#[derive(Debug, Clone, Default)]
pub struct Naming {
    /// No time budget: every look-up is made (a recorded file: [`symbols::Symbols::unbudgeted`]).
    pub unbudgeted: bool,
    /// The kallsyms file kernel frames are named from, when not `/proc/kallsyms`.
    pub kallsyms: Option<PathBuf>,
}

/// A look-up a writer asks for.
enum Ask {
    User {
        path: Arc<str>,
        build_id: Box<[u8]>,
        offset: u64,
    },
    Kernel {
        address: u64,
    },
    KallsymsReadable,
    /// The cold look-ups made so far (tests).
    #[cfg(test)]
    Cold,
}

/// The thread's answer.
enum Answer {
    Resolved(Arc<Resolved>),
    Readable(bool),
    #[cfg(test)]
    Count(u64),
}

struct Request {
    ask: Ask,
    naming: Naming,
    reply: Sender<Answer>,
}

/// Where a writer's look-ups are made: on its own thread (the default, a writer alone), or
/// on a symbolizer thread shared by the writers holding clones of one
/// [`SharedSymbols::thread`].
#[derive(Debug, Clone, Default)]
pub struct SharedSymbols {
    /// The thread's requests, once started (`Some(None)`: it could not be, and each
    /// look-up is made on the asking thread); `None`: look-ups on the asking thread.
    thread: Option<Arc<OnceLock<Option<Sender<Request>>>>>,
}

impl SharedSymbols {
    /// A symbolizer thread for the writers that get a clone; started at the first
    /// look-up, ended when the last clone is dropped. Each look-up is a round trip to
    /// it (≈ 50 µs on a 2-vCPU guest, BENCHMARKS.md), so a writer alone keeps the
    /// default.
    pub fn thread() -> Self {
        SharedSymbols {
            thread: Some(Arc::default()),
        }
    }

    /// What is at file offset `offset` of the file `path` (build id `build_id`, empty:
    /// unknown): [`symbols::Symbols::user`].
    pub fn user(
        &self,
        naming: &Naming,
        path: &Arc<str>,
        build_id: &[u8],
        offset: u64,
    ) -> Arc<Resolved> {
        let ask = Ask::User {
            path: path.clone(),
            build_id: build_id.into(),
            offset,
        };
        match self.ask(naming, ask) {
            Answer::Resolved(r) => r,
            _ => unreadable(),
        }
    }

    /// What is at the kernel address `address`: [`symbols::Symbols::kernel`].
    pub fn kernel(&self, naming: &Naming, address: u64) -> Arc<Resolved> {
        match self.ask(naming, Ask::Kernel { address }) {
            Answer::Resolved(r) => r,
            _ => unreadable(),
        }
    }

    /// Whether `/proc/kallsyms` shows addresses.
    pub fn kallsyms_readable(&self) -> bool {
        match self.ask(&Naming::default(), Ask::KallsymsReadable) {
            Answer::Readable(yes) => yes,
            _ => false,
        }
    }

    /// The cold look-ups the symbolizer has made.
    #[cfg(test)]
    pub fn cold(&self) -> u64 {
        match self.ask(&Naming::default(), Ask::Cold) {
            Answer::Count(n) => n,
            _ => 0,
        }
    }

    /// `ask` answered by the shared thread; on this thread without one (a writer alone,
    /// or a thread that could not be started or ended in a panic).
    fn ask(&self, naming: &Naming, ask: Ask) -> Answer {
        let Some(requests) = self
            .thread
            .as_ref()
            .and_then(|t| t.get_or_init(start).as_ref())
        else {
            return answer(naming, ask);
        };
        let unanswered = ask.unanswered();
        let (reply, answered) = crossbeam_channel::bounded(1);
        let request = Request {
            ask,
            naming: naming.clone(),
            reply,
        };
        match requests.send(request) {
            // The thread died on this request (a panic in the symbolizer): the frame goes
            // out without names rather than crash this thread on the same input; later
            // look-ups are made here.
            Ok(()) => answered.recv().unwrap_or(unanswered),
            Err(e) => answer(naming, e.into_inner().ask),
        }
    }
}

impl Ask {
    /// The answer when nothing could be looked up.
    fn unanswered(&self) -> Answer {
        match self {
            Ask::User { .. } | Ask::Kernel { .. } => Answer::Resolved(unreadable()),
            Ask::KallsymsReadable => Answer::Readable(false),
            #[cfg(test)]
            Ask::Cold => Answer::Count(0),
        }
    }
}

/// No names, for a look-up that could not be made.
fn unreadable() -> Arc<Resolved> {
    Arc::new(Resolved {
        frames: Vec::new(),
        reason: Some("unreadable"),
    })
}

/// The thread, started; `None` when it cannot be.
fn start() -> Option<Sender<Request>> {
    // Unbounded, yet never holds more than one request a writer: each writer waits for
    // its answer before it asks again.
    let (requests, asked) = crossbeam_channel::unbounded::<Request>();
    std::thread::Builder::new()
        .name("uevrec-symbols".into())
        .spawn(move || {
            for r in asked {
                let _ = r.reply.send(answer(&r.naming, r.ask));
            }
        })
        .ok()?;
    Some(requests)
}

/// `ask` answered by this thread's symbolizer.
fn answer(naming: &Naming, ask: Ask) -> Answer {
    symbols::with(|s| {
        s.unbudgeted = naming.unbudgeted;
        s.use_kallsyms(naming.kallsyms.as_deref());
        match ask {
            Ask::User {
                path,
                build_id,
                offset,
            } => Answer::Resolved(s.user(&path, &build_id, offset)),
            Ask::Kernel { address } => Answer::Resolved(s.kernel(address)),
            Ask::KallsymsReadable => Answer::Readable(s.kallsyms_readable()),
            #[cfg(test)]
            Ask::Cold => Answer::Count(s.cold),
        }
    })
}
