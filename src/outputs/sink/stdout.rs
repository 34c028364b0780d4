//! Standard output: JSON lines as they come (flushed per batch, so followers see each
//! wakeup's lines at once), or indented for humans with `--pretty`.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};

use super::{Sink, SinkError};

/// Writes batches to standard output.
pub struct StdoutSink<W: Write = io::Stdout> {
    out: W,
    /// The descriptor polled for a closed reader while idle.
    fd: Option<RawFd>,
    pretty: bool,
    scratch: Vec<u8>,
}

impl StdoutSink {
    /// A sink on the process's standard output; `pretty` indents every record.
    pub fn new(pretty: bool) -> Self {
        let out = io::stdout();
        let fd = out.as_raw_fd();
        StdoutSink {
            fd: Some(fd),
            ..StdoutSink::with_writer(out, pretty)
        }
    }
}

/// Whether the reader of `fd` (a pipe or socket) is gone: `poll` reports POLLERR on a
/// pipe whose read end is closed, POLLHUP on a socket shut down both ways.
fn reader_gone(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

impl<W: Write> StdoutSink<W> {
    /// A sink on any writer (tests); it is never polled for a closed reader.
    pub fn with_writer(out: W, pretty: bool) -> Self {
        StdoutSink {
            out,
            fd: None,
            pretty,
            scratch: Vec::new(),
        }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Re-indent one JSON line into `out` keeping key order and number literals; a line that
/// does not parse is copied as it is.
pub fn pretty_line(line: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let mut de = serde_json::Deserializer::from_slice(line);
    let mut ser = serde_json::Serializer::pretty(&mut *out);
    if serde_transcode::transcode(&mut de, &mut ser).is_err() || de.end().is_err() {
        out.truncate(start);
        out.extend_from_slice(line);
    }
    out.push(b'\n');
}

impl<W: Write> Sink for StdoutSink<W> {
    fn write_lines(&mut self, lines: &[u8]) -> Result<(), SinkError> {
        let bytes: &[u8] = if self.pretty {
            self.scratch.clear();
            for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                pretty_line(line, &mut self.scratch);
            }
            &self.scratch
        } else {
            lines
        };
        let err = |e| SinkError::io("writing to", "<stdout>", e);
        self.out.write_all(bytes).map_err(err)?;
        self.out.flush().map_err(err)
    }

    fn idle(&mut self) -> Result<(), SinkError> {
        match self.fd {
            Some(fd) if reader_gone(fd) => Err(SinkError::Closed),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_passes_lines_through() {
        let mut s = StdoutSink::with_writer(Vec::new(), false);
        s.write_lines(b"{\"b\":1,\"a\":2}\n").unwrap();
        assert_eq!(s.into_inner(), b"{\"b\":1,\"a\":2}\n");
    }

    #[test]
    fn pretty_keeps_order_and_big_integers() {
        let mut s = StdoutSink::with_writer(Vec::new(), true);
        s.write_lines(b"{\"z\":18446744073709551615,\"a\":[1,2]}\n{\"x\":\"\\n\"}\n")
            .unwrap();
        let text = String::from_utf8(s.into_inner()).unwrap();
        assert_eq!(
            text,
            "{\n  \"z\": 18446744073709551615,\n  \"a\": [\n    1,\n    2\n  ]\n}\n{\n  \"x\": \"\\n\"\n}\n"
        );
    }

    #[test]
    fn pretty_copies_unparsable_line() {
        let mut out = Vec::new();
        pretty_line(b"{\"a\":1} trailing", &mut out);
        assert_eq!(out, b"{\"a\":1} trailing\n");
    }

    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn idle_notices_a_closed_pipe() {
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors that are closed below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut s = StdoutSink {
            fd: Some(fds[1]),
            ..StdoutSink::with_writer(Vec::new(), false)
        };
        assert!(s.idle().is_ok(), "reader still open");
        // SAFETY: our own descriptors.
        unsafe { libc::close(fds[0]) };
        assert!(matches!(s.idle(), Err(SinkError::Closed)));
        // SAFETY: our own descriptor.
        unsafe { libc::close(fds[1]) };
    }

    #[test]
    fn epipe_is_closed() {
        let mut s = StdoutSink::with_writer(Broken, false);
        assert!(matches!(s.write_lines(b"{}\n"), Err(SinkError::Closed)));
    }
}
