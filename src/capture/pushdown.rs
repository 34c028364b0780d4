//! Terms of `--where` conditions pushed into the kernel's filter (docs/filtering.md,
//! "Push-down"): a comparison of a plain event's own field with a constant, which the
//! kernel can judge before the record reaches a ring. Each term is added to the filter
//! of an event only when the event's format has the field with a type the kernel
//! compares as the condition does (an integer with a number, a `char` string with a
//! string); the condition itself still judges every record that reaches uevrec.

use uevrec_parsers::{Element, EventFormat, FieldKind};

use crate::capture::selector::Selector;

/// A constant a pushed term compares with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushedValue {
    /// An integer.
    Int(i64),
    /// A string without `"`, `\` or the kernel's glob characters (`*?[`).
    Str(String),
}

/// One term: `FIELD OP VALUE`, for the events `selector` names (all without one).
#[derive(Debug, Clone)]
pub struct PushedTerm {
    /// The events it is for (`None`: every event).
    pub selector: Option<Selector>,
    /// The field's name.
    pub field: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=` (strings: `==`, `!=`).
    pub op: &'static str,
    /// The constant.
    pub value: PushedValue,
    /// A term on an EventHeader event's header (`level`, `opcode`: fields of its
    /// format), for EventHeader events only; otherwise on a plain event's own field, for
    /// plain events only (an EventHeader event's `fields` are its payload's, which the
    /// kernel does not see, not its format's).
    pub header: bool,
}

impl PushedTerm {
    /// The kernel filter text of this term for `system:event` of `format`, or `None`
    /// when it is not for that event, or its field is missing or of another type.
    pub fn for_event(&self, system: &str, event: &str, format: &EventFormat) -> Option<String> {
        if !self
            .selector
            .as_ref()
            .is_none_or(|s| s.matches(system, event))
        {
            return None;
        }
        if uevrec_parsers::eventheader::detect(format, event).is_some() != self.header {
            return None;
        }
        let field = format.fields.iter().find(|f| f.name == self.field)?;
        match (&self.value, &field.kind) {
            (PushedValue::Int(n), FieldKind::Integer { signed, .. }) if *signed || *n >= 0 => {
                Some(format!("{} {} {n}", self.field, self.op))
            }
            (
                PushedValue::Str(s),
                FieldKind::FixedArray {
                    elem: Element::Char,
                    ..
                }
                | FieldKind::Dynamic {
                    elem: Element::Char,
                    ..
                },
            ) if matches!(self.op, "==" | "!=") => {
                Some(format!("{} {} \"{s}\"", self.field, self.op))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys_enter() -> EventFormat {
        let text = uevrec_samples::register::format_file_text(
            "sys_enter",
            22,
            &[
                ("long id", 8, 8, true),
                ("unsigned long args[6]", 16, 48, false),
                ("char comm[16]", 64, 16, true),
            ],
            "\"\"",
        );
        uevrec_parsers::parse_format(&text).unwrap()
    }

    fn term(field: &str, op: &'static str, value: PushedValue) -> PushedTerm {
        PushedTerm {
            selector: None,
            field: field.into(),
            op,
            value,
            header: false,
        }
    }

    #[test]
    fn only_fields_of_the_right_type_are_pushed() {
        let f = sys_enter();
        let t = term("id", "==", PushedValue::Int(110));
        assert_eq!(
            t.for_event("raw_syscalls", "sys_enter", &f).as_deref(),
            Some("id == 110")
        );
        // An array element is not a field the kernel compares.
        assert!(
            term("args", "==", PushedValue::Int(1))
                .for_event("s", "e", &f)
                .is_none()
        );
        assert!(
            term("nope", "==", PushedValue::Int(1))
                .for_event("s", "e", &f)
                .is_none()
        );
        assert!(
            term("id", "==", PushedValue::Str("x".into()))
                .for_event("s", "e", &f)
                .is_none()
        );
        let s = term("comm", "!=", PushedValue::Str("perl".into()));
        assert_eq!(
            s.for_event("s", "e", &f).as_deref(),
            Some("comm != \"perl\"")
        );
        assert!(
            term("comm", "<", PushedValue::Str("a".into()))
                .for_event("s", "e", &f)
                .is_none()
        );
    }

    #[test]
    fn a_term_for_a_selector_is_for_its_events_only() {
        let mut t = term("id", ">", PushedValue::Int(3));
        t.selector = Some("sched:*".parse().unwrap());
        assert!(
            t.for_event("raw_syscalls", "sys_enter", &sys_enter())
                .is_none()
        );
        assert_eq!(
            t.for_event("sched", "x", &sys_enter()).as_deref(),
            Some("id > 3")
        );
    }

    /// `level` and `opcode` go into an EventHeader event's filter (its format's header
    /// fields); a plain field's term never does (`fields.level` of an EventHeader event
    /// is its payload's, which the kernel does not see), nor a header term into a plain
    /// event's.
    #[test]
    fn header_terms_are_for_eventheader_events_and_field_terms_for_plain_ones() {
        // As user_events writes an EventHeader event's format file.
        let eh = uevrec_parsers::parse_format(&uevrec_samples::register::format_file_text(
            "otel_L4K1",
            9,
            &[
                ("u8 eventheader_flags", 8, 1, false),
                ("u8 version", 9, 1, false),
                ("u16 id", 10, 2, false),
                ("u16 tag", 12, 2, false),
                ("u8 opcode", 14, 1, false),
                ("u8 level", 15, 1, false),
            ],
            "\"\"",
        ))
        .unwrap();
        let mut level = term("level", "<=", PushedValue::Int(3));
        level.header = true;
        assert_eq!(
            level.for_event("user_events", "otel_L4K1", &eh).as_deref(),
            Some("level <= 3")
        );
        assert!(level.for_event("s", "e", &sys_enter()).is_none());
        let payload = term("level", "<=", PushedValue::Int(3));
        assert!(payload.for_event("user_events", "otel_L4K1", &eh).is_none());
        let mut plain_level = sys_enter();
        plain_level.fields[0].name = "level".into();
        assert_eq!(
            payload.for_event("s", "e", &plain_level).as_deref(),
            Some("level <= 3")
        );
    }
}
