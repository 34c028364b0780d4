//! `top -g`'s call paths: a record's stack as the names of its functions, innermost
//! first, one a line (`syscall\nmiddle\nouter\nmain\n…`). The user frames when the stack
//! has any (where in the program the event fired), else the kernel frames (a kernel
//! thread's, or `--user-callchains` off with no user part). Calls inlined at a frame come
//! before its function, as they ran; a frame without a name is its module's file name
//! in brackets (`[libc.so.6]`, `[unknown]` outside any mapping), so the unnamed frames of
//! one module make one path, not one per address.
//!
//! The frames are walked and named as for the JSON lines (the same walk, cached names and
//! time budget: [`super::StackWriter`]), and each distinct stack's path is kept in the same
//! [`super::cache`], so a stack seen again is a hash of its addresses and an `Arc` clone.

use std::sync::Arc;

use uevrec_parsers::RecordStamp;
use uevrec_parsers::callchain::{Callchain, FrameContext};
use uevrec_parsers::user_stack::UserStack;

use super::{Frame, Named, StackWriter, Unwound};

/// The label of a chain the kernel could not have written, past its last readable frame.
pub const BROKEN: &str = "[broken]";

/// The reusable buffers of one thread's call paths.
#[derive(Debug, Default)]
pub struct CallPaths {
    user: String,
    kernel: String,
}

impl CallPaths {
    /// The call path of the record of `stamp` (the kernel's chain `stack`, and with
    /// `--call-graph dwarf` the user frames unwound from `user_stack`), its frames named
    /// by `names`; a stack seen before, as it was ([`super::cache`]).
    pub fn path(
        &mut self,
        names: &mut StackWriter,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user_stack: Option<UserStack<'_>>,
    ) -> Arc<str> {
        let unwound = names.unwind(stamp, stack, user_stack);
        let key = names.cache_key(stamp, stack, &unwound);
        let path = match names.cache.path(&key) {
            Some(kept) => Arc::clone(kept),
            None => {
                self.walk(names, stamp, stack, &unwound);
                let path: Arc<str> = if self.user.is_empty() {
                    Arc::from(self.kernel.as_str())
                } else {
                    Arc::from(self.user.as_str())
                };
                if !names.uncacheable {
                    names.cache.keep_path(&key, &path);
                }
                path
            }
        };
        names.unwound = unwound.frames;
        path
    }

    /// The labels of the user frames into `user`, of the others into `kernel`.
    fn walk(
        &mut self,
        names: &mut StackWriter,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        unwound: &Unwound,
    ) {
        let (user, kernel) = (&mut self.user, &mut self.kernel);
        user.clear();
        kernel.clear();
        names.walk(stamp, stack, unwound, &mut |frame| match frame {
            Frame::Broken(_) => {
                let part = if user.is_empty() {
                    &mut *kernel
                } else {
                    &mut *user
                };
                push_label(part, BROKEN);
            }
            Frame::Named { context, names, .. } => {
                let part = if context == FrameContext::User {
                    &mut *user
                } else {
                    &mut *kernel
                };
                push_labels(part, names);
            }
        });
    }
}

/// The frames of `path`, innermost first.
pub fn frames(path: &str) -> impl Iterator<Item = &str> {
    path.split('\n').filter(|f| !f.is_empty())
}

/// A named frame's labels: the calls inlined at it, then its function (or its module).
fn push_labels(part: &mut String, names: &Named) {
    for symbol in &names.inlined {
        push_label(part, symbol);
    }
    match &names.symbol {
        Some(symbol) => push_label(part, symbol),
        None => {
            // The text of a frame without a name: `[unknown] (MODULE)`.
            let module = names
                .text
                .strip_prefix("[unknown] (")
                .and_then(|m| m.strip_suffix(')'))
                .unwrap_or("[unknown]");
            let file = module.rsplit('/').find(|p| !p.is_empty()).unwrap_or(module);
            if file.starts_with('[') {
                push_label(part, file);
            } else {
                push_label(part, &format!("[{file}]"));
            }
        }
    }
}

/// `label` as the next line of `part` (a line break in it would split it: made a space).
fn push_label(part: &mut String, label: &str) {
    if !part.is_empty() {
        part.push('\n');
    }
    if label.contains('\n') {
        part.push_str(&label.replace('\n', " "));
    } else {
        part.push_str(label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::stacks::tests::{AT, PID, mmap, own_mapping, stamp_of, writer};
    use uevrec_parsers::Endian;
    use uevrec_parsers::callchain::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};

    fn path_of(w: &mut StackWriter, paths: &mut CallPaths, words: &[u64]) -> Arc<str> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        paths.path(
            w,
            &stamp_of(PID, 2),
            Callchain::new(&bytes, Endian::NATIVE),
            None,
        )
    }

    /// The user part names this test's own function (mapped from this test binary);
    /// an address in no mapping is `[unknown]`; a kernel-only stack is its kernel part;
    /// the second time the path comes from the cache, the same `Arc`.
    #[test]
    fn user_frames_by_name_kernel_frames_when_there_are_none() {
        let exe = std::env::current_exe().unwrap();
        let (start, end, pgoff, exe) = own_mapping(exe.to_str());
        let here = user_frames_by_name_kernel_frames_when_there_are_none as fn() as usize as u64;
        assert!((start..end).contains(&here));
        let mut w = writer();
        w.apply(Some(1), &mmap(AT, (start, end, pgoff), exe.as_bytes()));
        let mut paths = CallPaths::default();
        let in_exe = AT + (here - start) + 3;
        let words = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0130,
            PERF_CONTEXT_USER,
            in_exe,
            AT - 0x1000,
        ];
        let first = path_of(&mut w, &mut paths, &words);
        let labels: Vec<&str> = frames(&first).collect();
        assert_eq!(labels.len(), 2, "{labels:?}");
        assert!(
            labels[0].contains("user_frames_by_name_kernel_frames_when_there_are_none"),
            "{labels:?}"
        );
        assert_eq!(labels[1], "[unknown]");
        let again = path_of(&mut w, &mut paths, &words);
        assert!(Arc::ptr_eq(&first, &again), "from the cache");
        // No user part: the kernel's frames (named or not, one label each).
        let kernel = path_of(
            &mut w,
            &mut paths,
            &[PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0130],
        );
        assert_eq!(frames(&kernel).count(), 1, "{kernel}");
        // A broken chain ends with its mark.
        let broken = path_of(
            &mut w,
            &mut paths,
            &[PERF_CONTEXT_USER, in_exe, (-7i64) as u64],
        );
        assert_eq!(frames(&broken).last(), Some(BROKEN), "{broken}");
    }
}
