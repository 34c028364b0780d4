//! The compression of trace.dat v7 sections and trace-data chunks.

use std::io::Read;

/// The algorithm named in a v7 file's header (`"name\0version\0"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `none`: nothing is compressed (also every v6 file).
    None,
    /// `zstd`: Zstandard frames (trace-cmd's default when built with libzstd), decoded with
    /// the pure-Rust `ruzstd`.
    Zstd,
    /// `zlib`: zlib streams (RFC 1950), decoded with the pure-Rust `miniz_oxide`.
    Zlib,
}

impl Compression {
    /// The algorithm called `name` in the file header, `None` when not supported.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" | "" => Some(Compression::None),
            "zstd" => Some(Compression::Zstd),
            "zlib" => Some(Compression::Zlib),
            _ => None,
        }
    }

    /// The name trace-cmd writes for it.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Zlib => "zlib",
        }
    }

    /// Decompress `input` into `out` (cleared first), which must come to exactly
    /// `expected` bytes. Returns a message on failure.
    pub(crate) fn decompress(
        self,
        input: &[u8],
        expected: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.clear();
        match self {
            Compression::None => out.extend_from_slice(input),
            Compression::Zstd => {
                let mut source = input;
                let decoder = ruzstd::StreamingDecoder::new(&mut source)
                    .map_err(|e| format!("zstd frame header: {e}"))?;
                // One byte more than expected, to tell "too long" from "exactly".
                decoder
                    .take((expected as u64).saturating_add(1))
                    .read_to_end(out)
                    .map_err(|e| format!("zstd: {e}"))?;
            }
            Compression::Zlib => {
                let data = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(
                    input,
                    expected.saturating_add(1),
                )
                .map_err(|e| format!("zlib: {}", zlib_words(e.status)))?;
                *out = data;
            }
        }
        if out.len() != expected {
            return Err(format!(
                "{} data decompressed to {} bytes, the header says {expected}",
                self.name(),
                out.len()
            ));
        }
        Ok(())
    }
}

/// What miniz_oxide's inflate status means, in words.
fn zlib_words(status: miniz_oxide::inflate::TINFLStatus) -> &'static str {
    use miniz_oxide::inflate::TINFLStatus as S;
    match status {
        S::FailedCannotMakeProgress | S::NeedsMoreInput => "the compressed data ends early",
        S::BadParam => "bad parameters",
        S::Adler32Mismatch => "the checksum does not match",
        S::Failed => "the compressed data is corrupt",
        S::Done => "done",
        S::HasMoreOutput => "it inflates to more than the section says",
        _ => "the compressed data cannot be inflated",
    }
}
