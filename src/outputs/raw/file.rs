//! The perf.data file of `record --raw`: created new (never overwriting, never through a
//! link), starting as a pipe-mode perf.data ([`unfinished_header`]), the records appended
//! as they come (each event's attr and format before its first sample, so a file cut at
//! any byte by SIGKILL or a crash decodes to its last whole record), and at the end the
//! trailer (features, attrs) after the records and the file-mode header at offset 0 (what
//! perf script and perf report read).
//!
//! A failed append (ENOSPC, EIO …) is cut back with `ftruncate` to the last whole
//! write, so the data section always ends with a whole record and the file can still be
//! finished when space comes back (or the finish fails too and says so).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use uevrec_parsers::perf_data::header::FILE_HEADER_SIZE;
use uevrec_parsers::perf_data::writer::{self, Trailer, passed_over, unfinished_header};

use crate::outputs::sink::SinkError;
use crate::system::durable::{Syncer, sync_dir_of};

/// A perf.data being written.
#[derive(Debug)]
pub struct PerfDataFile {
    path: PathBuf,
    file: File,
    /// Bytes of records written after the header.
    data_size: u64,
    /// The data size before the last append that succeeded (see
    /// [`PerfDataFile::drop_last_append`]).
    before_last: Option<u64>,
    /// When to sync the data (`record --fsync`, [`crate::system::durable`]).
    syncer: Syncer,
}

/// Create the raw output `path` (mode `mode`, exactly, whatever the umask). An existing
/// file or link at `path` is an error: a recording is never appended to another.
pub fn create_new(path: &Path, mode: u32) -> Result<File, SinkError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                SinkError::io(
                    "creating",
                    path,
                    io::Error::other(
                        "it exists; record --raw never overwrites or appends: remove it or \
                         give another name",
                    ),
                )
            } else {
                SinkError::io("creating", path, e)
            }
        })?;
    // create_new's mode is masked by the umask: set it exactly.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| SinkError::io("writing to", path, e))?;
    Ok(file)
}

impl PerfDataFile {
    /// Create `path` (mode `mode`, exactly) starting as a pipe-mode perf.data
    /// ([`unfinished_header`]: readable up to its last whole record at any moment, the
    /// records that describe each event coming before its samples) until
    /// [`PerfDataFile::finish`] writes the file-mode header over it. An existing file or
    /// link at `path` is an error: a recording is never appended to another.
    pub fn create(path: &Path, mode: u32) -> Result<Self, SinkError> {
        let mut file = create_new(path, mode)?;
        let err = |e| SinkError::io("writing to", path, e);
        file.write_all(&unfinished_header()).map_err(err)?;
        let syncer = Syncer::current();
        if syncer.policy().syncs() {
            // The new name survives a power cut too.
            sync_dir_of(path).map_err(|e| SinkError::io("syncing the directory of", path, e))?;
        }
        Ok(PerfDataFile {
            path: path.to_owned(),
            file,
            data_size: 0,
            before_last: None,
            syncer,
        })
    }

    /// The path written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of records written so far.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Append whole records; on failure the file is cut back to the records before.
    pub fn append(&mut self, records: &[u8]) -> Result<(), SinkError> {
        if let Err(e) = self.file.write_all(records) {
            self.cut_to_data();
            return Err(SinkError::io("writing to", &self.path, e));
        }
        self.before_last = Some(self.data_size);
        self.data_size += records.len() as u64;
        self.syncer
            .wrote(&self.file)
            .map_err(|e| SinkError::io("syncing", &self.path, e))
    }

    /// Cut the file back to the end of its data section (what a failed write added goes;
    /// the file position may be past the cut: writes go on from the cut).
    fn cut_to_data(&mut self) {
        let end = FILE_HEADER_SIZE + self.data_size;
        let _ = self.file.set_len(end);
        let _ = io::Seek::seek(&mut self.file, io::SeekFrom::Start(end));
    }

    /// Remove the records of the last append that succeeded (once), to make room for the
    /// trailer on a full disk; false when there is none to remove.
    pub fn drop_last_append(&mut self) -> bool {
        let Some(before) = self.before_last.take() else {
            return false;
        };
        self.data_size = before;
        self.cut_to_data();
        true
    }

    /// Write `trailer` after the records and its header at offset 0 (a file-mode
    /// perf.data from then on), then turn the in-band records at `inband` (`(offset,
    /// length, type)`: the attrs, formats and features written before the samples) into
    /// records perf reads past ([`passed_over`]). A trailer that does not fit is cut off
    /// again: the caller may make room and call again.
    ///
    /// A kill during this leaves a readable file at every step: the pipe-mode stream
    /// with trailing bytes (before the header), or a file-mode file whose in-band
    /// records `uevrec decode` passes over (perf may not, until the last step).
    pub fn finish(
        &mut self,
        trailer: &Trailer,
        inband: &[(u64, usize, u32)],
    ) -> Result<(), SinkError> {
        // Where the records end, noted in the unfinished header first: a kill before the
        // file-mode header is written leaves a file read to there (writer::finishing_end).
        let mark = writer::finishing_mark(FILE_HEADER_SIZE + self.data_size);
        let noted = self.file.write_all_at(&mark, writer::FINISHING_END_AT);
        noted.map_err(|e| SinkError::io("finishing", &self.path, e))?;
        if let Err(e) = self.file.write_all(&trailer.bytes) {
            self.cut_to_data();
            return Err(SinkError::io("finishing", &self.path, e));
        }
        let err = |e| SinkError::io("finishing", &self.path, e);
        self.file.write_all_at(&trailer.header, 0).map_err(err)?;
        let end = FILE_HEADER_SIZE + self.data_size;
        for &(at, len, kind) in inband {
            if at + len as u64 > end {
                continue;
            }
            if let Some(h) = passed_over(len, kind) {
                self.file.write_all_at(&h, at).map_err(err)?;
            }
        }
        self.file.flush().map_err(err)?;
        let sync = |e| SinkError::io("syncing", &self.path, e);
        self.syncer.wrote(&self.file).map_err(sync)?;
        self.syncer.finish(&self.file).map_err(sync)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.data");
        std::fs::write(&p, "keep").unwrap();
        let e = PerfDataFile::create(&p, 0o600).unwrap_err();
        assert!(e.to_string().contains("never overwrites"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "keep");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("absent"), &link).unwrap();
        assert!(PerfDataFile::create(&link, 0o600).is_err());
        assert!(
            !dir.path().join("absent").exists(),
            "no file made through a link"
        );
    }

    #[test]
    fn the_last_append_can_be_dropped_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.data");
        let mut f = PerfDataFile::create(&p, 0o600).unwrap();
        assert!(!f.drop_last_append(), "nothing appended yet");
        f.append(&[1; 16]).unwrap();
        f.append(&[2; 24]).unwrap();
        assert!(f.drop_last_append());
        assert_eq!(f.data_size(), 16);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), FILE_HEADER_SIZE + 16);
        assert!(!f.drop_last_append(), "only the last one");
        // Writing goes on from the cut.
        f.append(&[3; 8]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(
            &bytes[FILE_HEADER_SIZE as usize..],
            &[[1u8; 16].as_slice(), &[3; 8]].concat()[..]
        );
    }

    #[test]
    fn mode_is_exact_and_header_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.data");
        let mut f = PerfDataFile::create(&p, 0o604).unwrap();
        f.append(&[1; 16]).unwrap();
        assert_eq!(f.data_size(), 16);
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o604);
        assert_eq!(meta.len(), FILE_HEADER_SIZE + 16);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..104], &unfinished_header()[..]);
    }
}
