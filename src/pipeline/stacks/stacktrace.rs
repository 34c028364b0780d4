//! A record's stack as OpenTelemetry's `code.stacktrace` text (`--format otlp`,
//! `--export`): the frames are named once, as the JSON path names them
//! ([`super::StackWriter::write`]), then written one frame a line by the parsers' one
//! helper ([`uevrec_parsers::stack_frames::write_stacktrace`]); no second naming.

use uevrec_parsers::RecordStamp;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::stack_frames::{StackFrame, write_stacktrace};
use uevrec_parsers::user_stack::UserStack;

use super::StackWriter;

/// The reusable buffers of one formatter worker's `code.stacktrace` texts.
#[derive(Debug, Default)]
pub struct StackText {
    json: Vec<u8>,
    text: String,
}

impl StackText {
    /// The stack of the record of `stamp` as `code.stacktrace` text (the kernel's chain,
    /// then the user frames unwound from `user_stack` under `--call-graph dwarf`), its
    /// frames named by `names`.
    pub fn render(
        &mut self,
        names: &mut StackWriter,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user_stack: Option<UserStack<'_>>,
    ) -> &str {
        self.json.clear();
        names.write(&mut self.json, stamp, stack, user_stack);
        self.text.clear();
        // `,"stack":` then the array the JSON path writes.
        let array = self.json.get(b",\"stack\":".len()..).unwrap_or_default();
        match serde_json::from_slice::<Vec<StackFrame<'_>>>(array) {
            Ok(frames) => write_stacktrace(&mut self.text, &frames),
            // The writer's own JSON: never, but a wrong stack is not shown as right.
            Err(e) => self.text = format!("\t[stack not written: {e}]\n"),
        }
        &self.text
    }
}
