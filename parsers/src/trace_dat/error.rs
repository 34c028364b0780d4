//! trace.dat errors: where ([`TraceDatError`]: the file offset, and inside a compressed
//! section or chunk the offset in its decompressed bytes) and why ([`ErrorKind`]).

use crate::ftrace_page::{LayoutError, PageError};

/// A trace.dat file that cannot be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace.dat {}: {kind}", place(*.offset, *.inner))]
pub struct TraceDatError {
    /// File offset of the problem, or of the compressed section or chunk it is in.
    pub offset: u64,
    /// For data inside a compressed section or chunk: the offset in its decompressed bytes.
    pub inner: Option<u64>,
    /// What is wrong.
    pub kind: ErrorKind,
}

fn place(offset: u64, inner: Option<u64>) -> String {
    match inner {
        None => format!("byte {offset}"),
        Some(inner) => format!("byte {inner} of the data decompressed from byte {offset}"),
    }
}

/// The kinds of [`TraceDatError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The file does not start with [`MAGIC`](super::MAGIC).
    #[error("not a trace.dat file (no \\x17\\x08\\x44tracing magic)")]
    NotTraceDat,
    /// A version other than 6 or 7.
    #[error("file version `{0}` is not supported (6 and 7 are)")]
    UnsupportedVersion(String),
    /// The data ends before something it declares.
    #[error("{what}: needs {needed} bytes, {available} left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes left.
        available: u64,
    },
    /// A fixed tag or value is not what the format requires.
    #[error("{what}: found `{found}`")]
    Unexpected {
        /// What was expected.
        what: &'static str,
        /// What is there.
        found: String,
    },
    /// The header_page / header_event texts describe no page layout this reader knows.
    #[error("{0}")]
    Layout(#[from] LayoutError),
    /// The file's compression algorithm is not supported.
    #[error("compression `{0}` is not supported (zstd, zlib and none are)")]
    UnsupportedCompression(String),
    /// A compressed section or chunk does not decompress.
    #[error("decompression failed: {0}")]
    Decompress(String),
    /// A declared size is over this reader's limit.
    #[error("{what} of {size} bytes is over the limit of {limit}")]
    TooLarge {
        /// What.
        what: &'static str,
        /// Its declared size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A ring-buffer page of this CPU is malformed.
    #[error("cpu {cpu}: {error}")]
    Page {
        /// The CPU whose data it is.
        cpu: u32,
        /// The page error (offset within the page).
        error: PageError,
    },
    /// The file ends inside the trace data of a CPU: a truncated copy, or a recording
    /// that was never finished. What lies before the cut was read ([`Records`](super::Records): whole
    /// pages, and the events wholly present of the page the cut goes through); this is the
    /// last item of that CPU's stream.
    #[error(
        "cpu {cpu}: the file ends {present} bytes into the {declared} bytes of trace data it \
         declares for this CPU (cut short: a truncated copy or an unfinished recording); {read}"
    )]
    CutShort {
        /// The CPU.
        cpu: u32,
        /// Bytes of its data the file declares.
        declared: u64,
        /// Bytes of it present.
        present: u64,
        /// What of it was read.
        read: String,
    },
    /// Something the file holds that this reader does not read.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Lines of the saved command lines that are not `PID COMM` (the others are kept).
    #[error(
        "{count} saved cmdline line(s) are not `PID COMM` (first: `{first}`): the records of \
         those pids get no `comm`"
    )]
    Cmdlines {
        /// How many lines.
        count: usize,
        /// The first of them (at most [`MAX_SHOWN`](super::MAX_SHOWN) characters).
        first: String,
    },
}
