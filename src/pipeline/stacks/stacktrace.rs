//! A record's stack as OpenTelemetry's `code.stacktrace` text (`--format otlp`,
//! `--export`): the frames are named once, as the JSON path names them (the same walk
//! and the same cached names, [`super::StackWriter`]), and each frame's line is kept with
//! its names, so a record's text is its addresses and copies, and a stack written before
//! one copy ([`super::cache`]); the lines are those of the parsers' one helper for them
//! ([`uevrec_parsers::stack_frames`]).

use uevrec_parsers::RecordStamp;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::stack_frames::{write_broken_line, write_frame_line, write_inlined_line};
use uevrec_parsers::user_stack::UserStack;

use super::{Frame, StackWriter, Unwound, hex_digits};

/// The reusable buffer of one formatter worker's `code.stacktrace` texts.
#[derive(Debug, Default)]
pub struct StackText {
    text: String,
}

impl StackText {
    /// The stack of the record of `stamp` as `code.stacktrace` text (the kernel's chain,
    /// then the user frames unwound from `user_stack` under `--call-graph dwarf`), its
    /// frames named by `names`; a stack written before, as it was ([`super::cache`]).
    pub fn render(
        &mut self,
        names: &mut StackWriter,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user_stack: Option<UserStack<'_>>,
    ) -> &str {
        let text = &mut self.text;
        text.clear();
        let unwound = names.unwind(stamp, stack, user_stack);
        let key = names.cache_key(stamp, stack, &unwound);
        if let Some(kept) = names.cache.text(&key) {
            text.push_str(kept);
        } else {
            write_text(text, names, stamp, stack, &unwound);
            if !names.uncacheable {
                names.cache.keep_text(&key, text);
            }
        }
        names.unwound = unwound.frames;
        &self.text
    }
}

/// The frames of the record of `stamp` as `code.stacktrace` lines, walked and named.
fn write_text(
    text: &mut String,
    names: &mut StackWriter,
    stamp: &RecordStamp,
    stack: Callchain<'_>,
    unwound: &Unwound,
) {
    // A broken chain's line is the last (as the text read back from JSON ends there).
    let mut broken = false;
    names.walk(stamp, stack, unwound, &mut |frame| match frame {
        _ if broken => {}
        Frame::Broken(why) => {
            write_broken_line(text, why);
            broken = true;
        }
        Frame::Named { address, names, .. } => {
            let mut digits = [0u8; 16];
            // Hex digits: ASCII, never the empty default.
            let addr = std::str::from_utf8(hex_digits(&mut digits, address)).unwrap_or_default();
            for symbol in &names.inlined {
                write_inlined_line(text, addr, symbol);
            }
            write_frame_line(text, addr, &names.text);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::stacks::StackOptions;
    use uevrec_parsers::Endian;
    use uevrec_parsers::callchain::{
        PERF_CONTEXT_GUEST, PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER,
    };
    use uevrec_parsers::stack_frames::{StackFrame, write_stacktrace};

    /// The text as it was made before it was written straight from the names: the JSON
    /// stack, read back, then written a frame a line.
    fn text_read_back(json: &[u8]) -> String {
        let array = &json[b",\"stack\":".len()..];
        let frames: Vec<StackFrame<'_>> = serde_json::from_slice(array).unwrap();
        let mut text = String::new();
        write_stacktrace(&mut text, &frames);
        text
    }

    /// Addresses of this process: some in each mapping of /proc/self/maps (this test
    /// program, libc, the vDSO, the heap, anonymous memory …), a few in kernel functions
    /// when /proc/kallsyms shows them, and one mapped nowhere.
    fn addresses() -> (Vec<u64>, Vec<u64>) {
        let mut user = vec![0x10];
        for line in std::fs::read_to_string("/proc/self/maps").unwrap().lines() {
            let range = line.split(' ').next().unwrap();
            let (start, end) = range.split_once('-').unwrap();
            let start = u64::from_str_radix(start, 16).unwrap();
            let end = u64::from_str_radix(end, 16).unwrap();
            let step = ((end - start) / 24).max(1);
            user.extend((start..end).step_by(step as usize).take(24).map(|a| a + 5));
        }
        let mut kernel = vec![0xffff_ffff_8100_0130];
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        kernel.extend(
            kallsyms
                .lines()
                .filter(|l| l.contains(" t ") || l.contains(" T "))
                .step_by(997)
                .filter_map(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
                .filter(|&a| a != 0)
                .map(|a| a + 9)
                .take(40),
        );
        (user, kernel)
    }

    fn chain(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// The text written straight from the names is byte for byte the text read back
    /// from the JSON stack of the same record, for every kind of frame this process
    /// has (named, inlined, unnamed, JIT code in a perf map, no mapping, kernel, guest)
    /// and broken chains; symbolized and not; fresh and from the caches.
    #[test]
    fn text_from_the_names_is_the_text_read_back_from_json() {
        let pid = std::process::id();
        // A JIT function named in this process's perf map, in executable anonymous memory.
        let jit = crate::system::proc_maps::ExecutablePage::map();
        let jit_at = jit.address();
        let perf_map = format!("/tmp/perf-{pid}.map");
        std::fs::write(&perf_map, format!("{jit_at:x} 100 jit\"stub\n")).unwrap();
        let (mut user, kernel) = addresses();
        user.extend([jit_at, jit_at + 0x20, jit_at + 0x200]);
        user.push(text_from_the_names_is_the_text_read_back_from_json as fn() as usize as u64 + 3);
        let mut stacks: Vec<Vec<u64>> = Vec::new();
        for (i, part) in user.chunks(9).enumerate() {
            let k = &kernel[i % kernel.len()..(i % kernel.len() + 3).min(kernel.len())];
            let mut words = vec![PERF_CONTEXT_KERNEL];
            words.extend(k);
            words.push(PERF_CONTEXT_USER);
            words.extend(part);
            stacks.push(words);
        }
        stacks.push(vec![PERF_CONTEXT_USER, user[1], PERF_CONTEXT_GUEST, 0x1234]);
        stacks.push(vec![
            PERF_CONTEXT_USER,
            user[1],
            PERF_CONTEXT_MAX + 7,
            user[2],
        ]);
        stacks.push(vec![user[1], PERF_CONTEXT_USER, user[2]]);
        stacks.push(vec![
            PERF_CONTEXT_USER,
            user[2],
            PERF_CONTEXT_KERNEL,
            kernel[0],
        ]);
        stacks.push(vec![]);

        let (mut compared, mut inlined, mut named, mut jit_named) = (0, 0, 0, 0);
        for symbolize in [true, false] {
            let options = StackOptions {
                symbolize,
                offline: false,
                max_frames: 127,
                ids: false,
                warm: false,
                kernel_frames: false,
            };
            let mut writer = StackWriter::new(options);
            let mut text = StackText::default();
            let stamp = RecordStamp {
                pid,
                tid: pid,
                ..RecordStamp::default()
            };
            // Each stack three times: fresh, then from the caches. A look-up the
            // symbolizer's time budget put off ("behind") is not kept, so the two
            // outputs of that round may name it differently: such rounds are retried.
            for words in &stacks {
                let bytes = chain(words);
                for _ in 0..3 {
                    let callchain = Callchain::new(&bytes, Endian::NATIVE);
                    let new = text.render(&mut writer, &stamp, callchain, None).to_owned();
                    let mut json = Vec::new();
                    writer.write(&mut json, &stamp, callchain, None);
                    if json.windows(8).any(|w| w == b"\"behind\"") {
                        continue;
                    }
                    assert_eq!(
                        new,
                        text_read_back(&json),
                        "{}",
                        String::from_utf8_lossy(&json)
                    );
                    compared += 1;
                    inlined += new.matches(" (inlined)\n").count();
                    named += new.matches("+0x").count();
                    jit_named += new.matches("jit\"stub+0x").count();
                }
            }
        }
        let _ = std::fs::remove_file(&perf_map);
        assert!(compared >= stacks.len() * 3, "{compared} compared");
        assert!(
            named > 0 && jit_named > 0 && inlined > 0,
            "named {named}, JIT {jit_named}, inlined {inlined}"
        );
        eprintln!("{compared} stacks compared: {named} named frames, {inlined} inlined calls");
    }
}
