//! Standard output: JSON lines as they come (flushed per batch, so followers see each
//! wakeup's lines at once), or indented for humans with `--pretty`.

use std::io::{self, Write};

use super::{Sink, SinkError};

/// Writes batches to standard output.
pub struct StdoutSink<W: Write = io::Stdout> {
    out: W,
    pretty: bool,
    scratch: Vec<u8>,
}

impl StdoutSink {
    /// A sink on the process's standard output; `pretty` indents every record.
    pub fn new(pretty: bool) -> Self {
        StdoutSink::with_writer(io::stdout(), pretty)
    }
}

impl<W: Write> StdoutSink<W> {
    /// A sink on any writer (tests).
    pub fn with_writer(out: W, pretty: bool) -> Self {
        StdoutSink {
            out,
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
    fn epipe_is_closed() {
        let mut s = StdoutSink::with_writer(Broken, false);
        assert!(matches!(s.write_lines(b"{}\n"), Err(SinkError::Closed)));
    }
}
