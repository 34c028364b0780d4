//! An output file that may rotate by size and reopens on request (SIGHUP). Whenever
//! uevrec dies, every file ends with a complete line: a failed write is cut back, a torn
//! last line left by a kill is cut when the file is next opened, and rotation happens only
//! between lines. The rules are at what they concern: [`FileOptions`] (mode, links),
//! [`Rotation`] (the renames), [`RotatingFile`] (cutting back, `--fsync`).

use crate::messages;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::stack_lines::StackLines;
use super::{Sink, SinkError};
use crate::capture::staging::written::FileSpan;

/// Size-based rotation: renames `FILE.{m-1}` → `FILE.{m}` … `FILE` → `FILE.1`, where `m`
/// is the first free number (at most `keep`: the oldest is then replaced, i.e. removed),
/// and creates a new `FILE`. A kill between two of those renames leaves one number free,
/// the files' order intact (higher is older), and the next rotation takes that number.
/// Rotation happens only between lines: a line is never split across files, and a single
/// line longer than the size limit gets a file of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a write would make the file larger than this many bytes.
    pub max_bytes: u64,
    /// Rotated files kept (`FILE.1` … `FILE.keep`); 0 = the old file is deleted.
    pub keep: u32,
}

/// How the output file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOptions {
    /// Permission bits of newly created files (default `0640`, set exactly, whatever the
    /// umask); an existing file is appended to, never truncated.
    pub mode: u32,
    /// Write through an existing symbolic link at the path (the first open and reopens
    /// only); otherwise a link there is refused (`O_NOFOLLOW`). Files created by rotation
    /// never follow links.
    pub follow_symlinks: bool,
    /// Rotate by size, if set.
    pub rotation: Option<Rotation>,
    /// Empty an existing regular file at the first open (`decode -o`, as perf's `-o`
    /// replaces); otherwise it is appended to (the recorder's log-file rule). Rotation's
    /// fresh files are new either way.
    pub replace: bool,
    /// `--stack-ids`: a file made by rotation or a reopen starts with the stack lines
    /// its records may name ([`StackLines`]).
    pub stack_lines: bool,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            mode: 0o640,
            follow_symlinks: false,
            rotation: None,
            replace: false,
            stack_lines: false,
        }
    }
}

/// A JSON-lines output file. A failed write (ENOSPC, EIO …) is cut back with `ftruncate`
/// to the length before it, so the file always ends with a complete line; a file that ends
/// in part of a line (uevrec was killed in the middle of a write) is cut back to its last
/// complete line when opened, and the bytes cut are said on standard error, so that lines
/// appended later never glue onto a torn one.
///
/// `--fsync` (crate::system::durable): the file's data is synced after each batch
/// (`batch`), or once an interval is over (at a write or while idle), and before the file
/// is renamed by rotation (then the directory too): a rotated file is whole on disk before
/// it gets its number. Rotated files only ever hold whole lines, so `FILE.N` is never torn,
/// whenever uevrec dies.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    /// `path` from the root (`--instance` announces it: the next run may start elsewhere).
    absolute: PathBuf,
    opts: FileOptions,
    file: File,
    /// Bytes in the current file (from fstat at open, then counted).
    size: u64,
    rotations: u64,
    syncer: crate::system::durable::Syncer,
    /// `--stack-ids`: the stack lines written, and the size of the current file after
    /// those it started with (a file holding only them is not rotated again).
    stack_lines: Option<StackLines>,
    after_stack_lines: u64,
}

/// Cut `file` (at `path`) back to just after its last `\n` if it ends in part of a line;
/// the bytes cut.
fn cut_torn_tail(file: &File, path: &Path) -> Result<u64, SinkError> {
    use std::os::unix::fs::FileExt as _;
    let len = file
        .metadata()
        .map_err(|e| SinkError::io("reading size of", path, e))?
        .len();
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        match file.read_exact_at(chunk, start) {
            Ok(()) => {}
            // Not readable (opened for appending only, a FIFO …): leave it as it is.
            Err(_) => return Ok(0),
        }
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep == len {
                return Ok(0);
            }
            file.set_len(keep)
                .map_err(|e| SinkError::io("cutting a torn last line of", path, e))?;
            return Ok(len - keep);
        }
        end = start;
    }
    if len > 0 {
        file.set_len(0)
            .map_err(|e| SinkError::io("cutting a torn last line of", path, e))?;
    }
    Ok(len)
}

/// [`cut_torn_tail`] of a file being opened for appending, said on standard error.
fn repair(file: &File, path: &Path) -> Result<(), SinkError> {
    let cut = cut_torn_tail(file, path)?;
    if cut > 0 {
        messages::print(format_args!(
            "uevrec: note: {} ended in part of a line ({cut} bytes, left by a writer killed \
             in the middle of a write): cut back to its last complete line\n",
            path.display()
        ));
    }
    Ok(())
}

/// Open `path` for appending: create it with exactly `mode` if missing.
fn open_append(path: &Path, mode: u32, follow: bool) -> Result<File, SinkError> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let mut o = OpenOptions::new();
    o.append(true).custom_flags(nofollow | libc::O_CLOEXEC);
    let err = |e: io::Error| {
        if e.raw_os_error() == Some(libc::ELOOP) && !follow {
            SinkError::Symlink {
                path: path.to_owned(),
            }
        } else {
            SinkError::io("opening", path, e)
        }
    };
    // Try to create it first so a new file gets the exact mode (umask would mask it).
    match o.clone().create_new(true).mode(mode).open(path) {
        Ok(f) => {
            f.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(err)?;
            Ok(f)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Readable too where allowed, to find a torn last line.
            let f = match o.clone().read(true).open(path) {
                Ok(f) => f,
                Err(_) => o.open(path).map_err(err)?,
            };
            if f.metadata().is_ok_and(|m| m.is_file()) {
                repair(&f, path)?;
            }
            Ok(f)
        }
        Err(e) => Err(err(e)),
    }
}

/// Empty the regular file at `path`, if there is one (a FIFO, a device or a missing file
/// is left alone); a link there is followed only with `follow`.
fn empty_existing(path: &Path, follow: bool) -> Result<(), SinkError> {
    let meta = if follow {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    };
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    match meta {
        Ok(m) if m.is_file() => OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(nofollow | libc::O_CLOEXEC)
            .open(path)
            .map(drop)
            .map_err(|e| SinkError::io("emptying", path, e)),
        _ => Ok(()),
    }
}

/// Whether something (a file, a link, anything) has the name `path`; an error other than
/// "not found" counts as present, so that rotation renames onto it and reports that error.
fn present(path: &Path) -> bool {
    !matches!(fs::symlink_metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

/// `FILE.n`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

impl RotatingFile {
    /// Open (or create) `path` under `opts`.
    pub fn open(path: impl Into<PathBuf>, opts: FileOptions) -> Result<Self, SinkError> {
        let path = path.into();
        if opts.replace {
            empty_existing(&path, opts.follow_symlinks)?;
        }
        let file = open_append(&path, opts.mode, opts.follow_symlinks)?;
        let size = file
            .metadata()
            .map_err(|e| SinkError::io("reading size of", &path, e))?
            .len();
        let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        Ok(RotatingFile {
            path,
            absolute,
            opts,
            file,
            size,
            rotations: 0,
            syncer: crate::system::durable::Syncer::current(),
            stack_lines: opts.stack_lines.then(StackLines::default),
            after_stack_lines: 0,
        })
    }

    /// The path written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many rotations happened.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    /// Rename the numbered files up, move the current file to `.1`, open a fresh one.
    fn rotate(&mut self, keep: u32) -> Result<(), SinkError> {
        // Whole on disk before it is renamed (as the policy asks).
        self.syncer
            .finish(&self.file)
            .map_err(|e| SinkError::io("syncing", &self.path, e))?;
        let ignore_missing = |r: io::Result<()>, what, p: &Path| match r {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(SinkError::io(what, p, e)),
            _ => Ok(()),
        };
        if keep == 0 {
            ignore_missing(fs::remove_file(&self.path), "removing", &self.path)?;
        } else {
            // Only the files below the first free number move up (logrotate does the
            // same): a rotation costs a rename per file kept, not `keep` of them, and a
            // number left free by a kill in the middle of a rotation (`FILE.3`, `FILE.1`
            // and no `FILE.2`) is taken by the next rotation instead of moving with the
            // others for ever. At `keep` files the oldest is replaced.
            let free = (1..keep)
                .find(|&n| !present(&numbered(&self.path, n)))
                .unwrap_or(keep);
            for n in (1..free).rev() {
                let from = numbered(&self.path, n);
                ignore_missing(
                    fs::rename(&from, numbered(&self.path, n + 1)),
                    "rotating",
                    &from,
                )?;
            }
            ignore_missing(
                fs::rename(&self.path, numbered(&self.path, 1)),
                "rotating",
                &self.path,
            )?;
        }
        // rename/unlink act on links themselves; the new file never follows one.
        self.file = open_append(&self.path, self.opts.mode, false)?;
        if self.syncer.policy().syncs() {
            crate::system::durable::sync_dir_of(&self.path)
                .map_err(|e| SinkError::io("syncing the directory of", &self.path, e))?;
        }
        self.size = self
            .file
            .metadata()
            .map_err(|e| SinkError::io("reading size of", &self.path, e))?
            .len();
        self.rotations += 1;
        self.start_with_stack_lines()
    }

    /// `--stack-ids`: begin a new file with the stack lines its records may name.
    fn start_with_stack_lines(&mut self) -> Result<(), SinkError> {
        let Some(lines) = self.stack_lines.as_ref().map(StackLines::preamble) else {
            return Ok(());
        };
        self.write_chunk(&lines)?;
        self.after_stack_lines = self.size;
        Ok(())
    }

    /// Append `chunk` (the stack lines in it kept for the next file).
    fn append(&mut self, chunk: &[u8]) -> Result<(), SinkError> {
        self.write_chunk(chunk)?;
        if let Some(s) = &mut self.stack_lines {
            s.pass(chunk);
        }
        Ok(())
    }

    /// Append `chunk`; on failure cut the file back to its length before the write.
    fn write_chunk(&mut self, chunk: &[u8]) -> Result<(), SinkError> {
        let before = self.file.metadata().map(|m| m.len()).unwrap_or(self.size);
        if let Err(e) = self.file.write_all(chunk) {
            // A partial line may have landed: remove it so the file ends with '\n'.
            let _ = self.file.set_len(before);
            return Err(SinkError::io("writing to", &self.path, e));
        }
        self.size = before + chunk.len() as u64;
        self.syncer
            .wrote(&self.file)
            .map_err(|e| SinkError::io("syncing", &self.path, e))
    }
}

/// The longest prefix of `lines` made of whole lines and at most `room` bytes.
fn whole_lines_within(lines: &[u8], room: u64) -> usize {
    let limit = lines.len().min(usize::try_from(room).unwrap_or(usize::MAX));
    lines[..limit]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
}

/// The first line of `lines` (up to and including its `\n`, or all of it).
fn first_line(lines: &[u8]) -> usize {
    lines
        .iter()
        .position(|&b| b == b'\n')
        .map_or(lines.len(), |i| i + 1)
}

impl Sink for RotatingFile {
    fn span_of(&self, len: usize) -> Option<FileSpan<'_>> {
        let len = len as u64;
        if self
            .opts
            .rotation
            .is_some_and(|rot| self.size.saturating_add(len) > rot.max_bytes)
        {
            // The lines would go to the next file, or to two.
            return None;
        }
        let m = self.file.metadata().ok()?;
        Some(FileSpan {
            path: &self.absolute,
            dev: m.dev(),
            ino: m.ino(),
            born: crate::capture::staging::written::born_ns(&m).unwrap_or(0),
            start: m.len(),
            end: m.len() + len,
        })
    }

    fn write_lines(&mut self, mut lines: &[u8]) -> Result<(), SinkError> {
        let Some(rot) = self.opts.rotation else {
            return self.append(lines);
        };
        while !lines.is_empty() {
            let room = rot.max_bytes.saturating_sub(self.size);
            let mut take = whole_lines_within(lines, room);
            if take == 0 {
                // A file with no line but the stack lines it began with takes the line.
                if self.size > self.after_stack_lines {
                    self.rotate(rot.keep)?;
                    continue;
                }
                // An empty file and a line longer than the limit: it gets the file alone.
                take = first_line(lines);
            }
            self.append(&lines[..take])?;
            lines = &lines[take..];
        }
        Ok(())
    }

    fn idle(&mut self) -> Result<(), SinkError> {
        self.syncer
            .tick(&self.file)
            .map_err(|e| SinkError::io("syncing", &self.path, e))
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.syncer
            .finish(&self.file)
            .map_err(|e| SinkError::io("syncing", &self.path, e))
    }

    fn reopen(&mut self) -> Result<(), SinkError> {
        let _ = self.syncer.finish(&self.file);
        let file = open_append(&self.path, self.opts.mode, self.opts.follow_symlinks)?;
        self.size = file
            .metadata()
            .map_err(|e| SinkError::io("reading size of", &self.path, e))?
            .len();
        self.file = file;
        // Another file at the path now, mostly (logrotate renamed the old one).
        self.start_with_stack_lines()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A rotating file `r.json` in a fresh directory.
    fn rotating(max_bytes: u64, keep: u32) -> (tempfile::TempDir, PathBuf, RotatingFile) {
        rotating_with(max_bytes, keep, false)
    }

    /// [`rotating`], starting each new file with the stack lines when `stack_lines`.
    fn rotating_with(
        max_bytes: u64,
        keep: u32,
        stack_lines: bool,
    ) -> (tempfile::TempDir, PathBuf, RotatingFile) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let opts = FileOptions {
            rotation: Some(Rotation { max_bytes, keep }),
            stack_lines,
            ..Default::default()
        };
        let f = RotatingFile::open(&p, opts).unwrap();
        (dir, p, f)
    }

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap()
    }

    fn lines(n: std::ops::Range<u32>) -> Vec<u8> {
        n.map(|i| format!("{{\"n\":{i:04}}}\n"))
            .collect::<String>()
            .into_bytes() // 11 bytes each
    }

    /// Run the calling test `name` (in this module) in a child process of this test
    /// binary, so that its change of process-wide state (umask, rlimits, a signal
    /// disposition) cannot touch tests running beside it in other threads. Returns `true`
    /// in the child, which runs the body; the parent returns `false` once the child
    /// passed (and fails with its output otherwise).
    fn in_own_process(name: &str) -> bool {
        const CHILD: &str = "UEVREC_TEST_IN_CHILD";
        let full = format!("{}::{name}", module_path!().split_once("::").unwrap().1);
        if std::env::var(CHILD).is_ok_and(|v| v == full) {
            return true;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &full, "--test-threads=1", "--nocapture"])
            .env(CHILD, &full)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{full} in its own process: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        false
    }

    #[test]
    fn new_file_gets_exact_mode_and_existing_is_appended() {
        if !in_own_process("new_file_gets_exact_mode_and_existing_is_appended") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        // SAFETY: umask only swaps the process's file-creation mask; restored below.
        let old = unsafe { libc::umask(0o077) };
        let mut f = RotatingFile::open(
            &p,
            FileOptions {
                mode: 0o644,
                ..Default::default()
            },
        )
        .unwrap();
        // SAFETY: restores the mask saved above.
        unsafe { libc::umask(old) };
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        f.write_lines(b"{\"a\":1}\n").unwrap();
        drop(f);
        let mut f = RotatingFile::open(&p, FileOptions::default()).unwrap();
        f.write_lines(b"{\"a\":2}\n").unwrap();
        assert_eq!(read(&p), "{\"a\":1}\n{\"a\":2}\n");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644,
            "mode of existing file kept"
        );
    }

    #[test]
    fn symlink_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, "keep\n").unwrap();
        let link = dir.path().join("link");
        symlink(&target, &link).unwrap();
        let err = RotatingFile::open(&link, FileOptions::default()).unwrap_err();
        assert!(matches!(err, SinkError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("--follow-symlinks"));
        let opts = FileOptions {
            follow_symlinks: true,
            ..Default::default()
        };
        RotatingFile::open(&link, opts)
            .unwrap()
            .write_lines(b"x\n")
            .unwrap();
        assert_eq!(read(&target), "keep\nx\n");
    }

    #[test]
    fn rotation_keeps_every_line_once_and_whole() {
        let (_dir, p, mut f) = rotating(50, 100);
        // Batches of various sizes, including one far larger than the limit.
        for range in [0..3, 3..4, 4..30, 30..31, 31..40] {
            f.write_lines(&lines(range)).unwrap();
        }
        assert!(f.rotations() > 3);
        let mut all = Vec::new();
        for n in (1..=f.rotations() as u32).rev() {
            let text = read(&numbered(&p, n));
            assert!(text.len() <= 50 && text.ends_with('\n'), "{n}: {text:?}");
            all.push(text);
        }
        all.push(read(&p));
        assert_eq!(all.concat().into_bytes(), lines(0..40));
    }

    #[test]
    fn rotation_drops_oldest_beyond_keep() {
        let (_dir, p, mut f) = rotating(22, 2);
        for i in 0..10 {
            f.write_lines(&lines(i..i + 1)).unwrap();
        }
        assert_eq!(read(&p).into_bytes(), lines(8..10));
        assert_eq!(read(&numbered(&p, 1)).into_bytes(), lines(6..8));
        assert_eq!(read(&numbered(&p, 2)).into_bytes(), lines(4..6));
        assert!(!numbered(&p, 3).exists());
    }

    #[test]
    fn a_free_number_is_taken_by_the_next_rotation_and_files_above_it_stay() {
        // As a kill between two renames of a rotation leaves it: FILE.1 moved to FILE.2,
        // FILE not yet to FILE.1.
        let (_dir, p, mut f) = rotating(22, 100_000);
        for (n, text) in [(2, "two\n"), (3, "three\n")] {
            fs::write(numbered(&p, n), text).unwrap();
        }
        f.write_lines(&lines(0..3)).unwrap();
        assert_eq!(read(&numbered(&p, 1)).into_bytes(), lines(0..2));
        assert_eq!(read(&numbered(&p, 2)), "two\n");
        assert_eq!(read(&numbered(&p, 3)), "three\n");
        assert!(!numbered(&p, 4).exists());
        f.write_lines(&lines(3..5)).unwrap();
        assert_eq!(read(&numbered(&p, 4)), "three\n");
        assert_eq!(read(&numbered(&p, 3)), "two\n");
        assert_eq!(read(&numbered(&p, 2)).into_bytes(), lines(0..2));
        assert_eq!(read(&numbered(&p, 1)).into_bytes(), lines(2..4));
        assert_eq!(read(&p).into_bytes(), lines(4..5));
    }

    #[test]
    fn rotation_keep_zero_deletes_old_file() {
        let (_dir, p, mut f) = rotating(4, 0);
        f.write_lines(b"aa\nbb\n").unwrap();
        assert_eq!(read(&p), "bb\n");
        assert!(!numbered(&p, 1).exists());
    }

    #[test]
    fn oversized_line_gets_its_own_file() {
        let (_dir, p, mut f) = rotating(8, 5);
        f.write_lines(b"a\n0123456789abc\nb\n").unwrap();
        assert_eq!(read(&numbered(&p, 2)), "a\n");
        assert_eq!(read(&numbered(&p, 1)), "0123456789abc\n");
        assert_eq!(read(&p), "b\n");
    }

    #[test]
    fn rotation_never_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        let rot = Rotation {
            max_bytes: 4,
            keep: 1,
        };
        let mut f = RotatingFile::open(
            &p,
            FileOptions {
                rotation: Some(rot),
                ..Default::default()
            },
        )
        .unwrap();
        f.write_lines(b"aa\n").unwrap();
        // Someone plants a link where the rotated file will go: rename replaces the link.
        symlink(&victim, numbered(&p, 1)).unwrap();
        f.write_lines(b"bb\n").unwrap();
        assert_eq!(read(&victim), "precious\n");
        assert_eq!(read(&numbered(&p, 1)), "aa\n");
        assert!(
            !fs::symlink_metadata(numbered(&p, 1))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(read(&p), "bb\n");
    }

    #[test]
    fn reopen_follows_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.json");
        let mut f = RotatingFile::open(&p, FileOptions::default()).unwrap();
        f.write_lines(b"1\n").unwrap();
        fs::rename(&p, dir.path().join("o.json.old")).unwrap();
        f.reopen().unwrap();
        f.write_lines(b"2\n").unwrap();
        assert_eq!(read(&dir.path().join("o.json.old")), "1\n");
        assert_eq!(read(&p), "2\n");
    }

    /// The stack ids a `--stack-ids` file names before its own stack lines define them.
    fn undefined_stack_ids(text: &str) -> Vec<u64> {
        let mut defined = std::collections::HashSet::new();
        let mut undefined = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["uevrec"] == "stack" {
                defined.insert(v["id"].as_u64().unwrap());
            } else if let Some(id) = v["stack_id"].as_u64()
                && !defined.contains(&id)
            {
                undefined.push(id);
            }
        }
        undefined
    }

    #[test]
    fn with_stack_ids_every_file_defines_the_stacks_it_names() {
        use crate::pipeline::stacks::ids;
        let (dir, p, mut f) = rotating_with(300, 100, true);
        // Two workers' stacks; worker 0's place 1 is filled again halfway (its first
        // stack left the cache and is never named again).
        let (a, b) = (ids::stack_id(0, 0, 1), ids::stack_id(0, 1, 1));
        let a2 = ids::stack_id(1, 0, 1);
        let mut expected = 0;
        for i in 0..60u64 {
            let mut batch = Vec::new();
            let (id, frames) = match i {
                0..30 => (if i % 2 == 0 { a } else { b }, "[\"one\"]"),
                _ => (if i % 2 == 0 { a2 } else { b }, "[\"two\"]"),
            };
            if i == 0 || i == 1 || i == 30 {
                ids::write_line(&mut batch, None, id, frames.as_bytes());
            }
            batch.extend_from_slice(format!("{{\"n\":{i},\"stack_id\":{id}}}\n").as_bytes());
            f.write_lines(&batch).unwrap();
            expected += 1;
        }
        assert!(f.rotations() > 5, "{}", f.rotations());
        let mut records = 0;
        for n in (0..=f.rotations() as u32).rev() {
            let file = if n == 0 { p.clone() } else { numbered(&p, n) };
            let text = read(&file);
            assert_eq!(undefined_stack_ids(&text), Vec::<u64>::new(), "{n}: {text}");
            records += text.lines().filter(|l| l.contains("\"n\"")).count();
            // The stacks of the latest fill of each place only.
            assert!(text.matches("\"uevrec\"").count() <= 3, "{n}: {text}");
        }
        assert_eq!(records, expected);
        // A reopened file (logrotate renamed the old one) starts with them too.
        fs::rename(&p, dir.path().join("r.json.old")).unwrap();
        f.reopen().unwrap();
        f.write_lines(format!("{{\"n\":60,\"stack_id\":{b}}}\n").as_bytes())
            .unwrap();
        let text = read(&p);
        assert!(
            text.starts_with("{\"time\":null,\"uevrec\":\"stack\""),
            "{text}"
        );
        assert_eq!(undefined_stack_ids(&text), Vec::<u64>::new());
        assert!(!text.contains("[\"one\"]") || !text.contains(&format!(":{a},")));
    }

    #[test]
    fn stack_lines_larger_than_a_file_still_let_records_through() {
        use crate::pipeline::stacks::ids;
        let (_dir, p, mut f) = rotating_with(60, 100, true);
        let mut batch = Vec::new();
        ids::write_line(
            &mut batch,
            None,
            0,
            format!("[\"{}\"]", "x".repeat(80)).as_bytes(),
        );
        f.write_lines(&batch).unwrap();
        for i in 0..3 {
            f.write_lines(format!("{{\"n\":{i},\"stack_id\":0}}\n").as_bytes())
                .unwrap();
        }
        // Each file: the (too large) stack line, then one record, never a loop.
        assert_eq!(f.rotations(), 3);
        let text = read(&p);
        assert_eq!(undefined_stack_ids(&text), Vec::<u64>::new());
        assert!(text.ends_with("{\"n\":2,\"stack_id\":0}\n"), "{text}");
    }

    #[test]
    fn failed_write_is_cut_back_to_a_whole_line() {
        // RLIMIT_FSIZE makes the kernel accept part of a write and then fail (EFBIG, with
        // SIGXFSZ ignored): the partial line must be cut off again. In a process of its
        // own: the limit and the ignored signal apply to the whole process.
        if !in_own_process("failed_write_is_cut_back_to_a_whole_line") {
            return;
        }
        const LIMIT: u64 = 200_000;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.json");
        let mut f = RotatingFile::open(&p, FileOptions::default()).unwrap();
        f.write_lines(b"ok\n").unwrap();
        let big = vec![b'x'; 300_000];
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain libc calls with valid pointers.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            libc::getrlimit(libc::RLIMIT_FSIZE, &mut old);
            let lim = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: old.rlim_max,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
        }
        let mut batch = big.clone();
        batch.push(b'\n');
        let err = f.write_lines(&batch);
        // SAFETY: restores the limit read above.
        unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &old) };
        let err = err.unwrap_err();
        assert!(err.to_string().contains("o.json"), "{err}");
        assert_eq!(read(&p), "ok\n");
        f.write_lines(b"after\n").unwrap();
        assert_eq!(read(&p), "ok\nafter\n");
    }

    #[test]
    fn a_torn_last_line_is_cut_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.json");
        fs::write(&p, "{\"a\":1}\n{\"a\":2}\n{\"a\"").unwrap();
        let mut f = RotatingFile::open(&p, FileOptions::default()).unwrap();
        assert_eq!(read(&p), "{\"a\":1}\n{\"a\":2}\n");
        f.write_lines(b"{\"a\":3}\n").unwrap();
        assert_eq!(read(&p), "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        // A file of one partial line is emptied; a whole one is left as it is.
        fs::write(&p, "x".repeat(200_000)).unwrap();
        RotatingFile::open(&p, FileOptions::default()).unwrap();
        assert_eq!(read(&p), "");
        fs::write(&p, "y\n").unwrap();
        RotatingFile::open(&p, FileOptions::default()).unwrap();
        assert_eq!(read(&p), "y\n");
    }

    #[test]
    fn whole_lines_prefix() {
        assert_eq!(whole_lines_within(b"ab\ncd\nef\n", 5), 3);
        assert_eq!(whole_lines_within(b"ab\ncd\nef\n", 6), 6);
        assert_eq!(whole_lines_within(b"ab\ncd\n", 100), 6);
        assert_eq!(whole_lines_within(b"abcdef\n", 3), 0);
        assert_eq!(first_line(b"abcdef\nx\n"), 7);
        assert_eq!(first_line(b"abc"), 3);
    }
}
