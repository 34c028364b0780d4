use super::*;
use proptest::prelude::*;
use uevrec_parsers::parse_format;

/// raw_syscalls:sys_enter's format (its fields as Linux 6.18 describes them).
fn sys_enter_format() -> uevrec_parsers::EventFormat {
    let text = uevrec_samples::register::format_file_text(
        "sys_enter",
        443,
        &[
            ("long id", 8, 8, true),
            ("unsigned long args[6]", 16, 48, false),
        ],
        "\"NR %ld\", REC->id",
    );
    parse_format(&text).unwrap()
}

fn sys_enter() -> PreparedFormat {
    PreparedFormat::new(&sys_enter_format(), "raw_syscalls", "sys_enter", None)
}

/// A sys_enter record of syscall `id` with `args`.
fn record(id: i64, args: [u64; 6]) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&id.to_le_bytes());
    for a in args {
        raw.extend_from_slice(&a.to_le_bytes());
    }
    raw
}

fn filter(rules: &[&str]) -> Arc<Filter> {
    Filter::new(
        rules.iter().map(|r| r.parse().unwrap()).collect(),
        vec![],
        vec![],
    )
    .unwrap()
}

fn stamp(pid: u32) -> RecordStamp {
    RecordStamp {
        time_unix_ns: Some(1),
        cpu: 1,
        pid,
        tid: pid,
    }
}

#[test]
fn keeps_the_records_whose_decoded_argument_holds_and_counts_the_rest() {
    let f = filter(&["fields.args[1] % 3 == 0 && fields.args[0] == 424242"]);
    let prepared = sys_enter();
    let ff = f.for_format(&prepared).unwrap();
    let mut kept = Vec::new();
    for seq in 1..=300u64 {
        let raw = record(110, [424242, seq, 0, 0, 0, 0]);
        if ff.keep(&prepared, &stamp(7), &raw, Endian::Little) {
            kept.push(seq);
        }
    }
    assert_eq!(kept, (1..=100).map(|k| 3 * k).collect::<Vec<u64>>());
    let counted = f.counted();
    assert_eq!(counted.len(), 1);
    assert_eq!(counted[0].0, "raw_syscalls:sys_enter");
    assert_eq!(
        counted[0].1,
        Counted {
            kept: 100,
            filtered: 200,
            ..Counted::default()
        }
    );
}

#[test]
fn reads_the_record_variables() {
    let f = filter(&[
        "system == 'raw_syscalls' && event == 'sys_enter' && pid == 7 && tid == 7 && cpu == 1 && fields.id == 110",
    ]);
    let prepared = sys_enter();
    let ff = f.for_format(&prepared).unwrap();
    let raw = record(110, [0; 6]);
    assert!(ff.keep(&prepared, &stamp(7), &raw, Endian::Little));
    assert!(!ff.keep(&prepared, &stamp(8), &raw, Endian::Little));
}

#[test]
fn a_field_missing_from_a_record_is_not_kept_and_counted_as_such() {
    let f = filter(&["fields.args[1] == 5"]);
    let prepared = sys_enter();
    let ff = f.for_format(&prepared).unwrap();
    // Cut short: args does not decode.
    let raw = record(110, [0, 5, 0, 0, 0, 0]);
    assert!(!ff.keep(&prepared, &stamp(1), &raw[..20], Endian::Little));
    assert!(ff.keep(&prepared, &stamp(1), &raw, Endian::Little));
    let c = f.counted()[0].1;
    assert_eq!((c.kept, c.filtered, c.filter_error), (1, 0, 1));
}

#[test]
fn has_tells_whether_a_field_is_there() {
    let f = filter(&["has(fields.id) && !has(fields.nope)"]);
    let prepared = sys_enter();
    let ff = f.for_format(&prepared).unwrap();
    assert!(ff.keep(&prepared, &stamp(1), &record(1, [0; 6]), Endian::Little));
}

#[test]
fn a_rule_for_a_selector_applies_to_its_events_only() {
    let f = filter(&["sched:*=pid == 1"]);
    assert!(f.for_format(&sys_enter()).is_none());
    let f = filter(&["raw_syscalls:sys_*=pid == 1", "fields.id == 3"]);
    let prepared = sys_enter();
    let ff = f.for_format(&prepared).unwrap();
    assert!(ff.keep(&prepared, &stamp(1), &record(3, [0; 6]), Endian::Little));
    assert!(!ff.keep(&prepared, &stamp(1), &record(4, [0; 6]), Endian::Little));
    assert!(!ff.keep(&prepared, &stamp(2), &record(3, [0; 6]), Endian::Little));
}

#[test]
fn an_expression_with_equals_is_not_a_selector() {
    let r: WhereRule = "pid == 3".parse().unwrap();
    assert!(r.selector.is_none());
    let r: WhereRule = "user_events:*=level <= 2".parse().unwrap();
    assert_eq!(r.selector.unwrap().to_string(), "user_events:*");
    assert_eq!(r.condition.text(), "level <= 2");
}

#[test]
fn an_error_after_a_selector_points_into_the_whole_text() {
    let e = "raw_syscalls:*=fields.id =="
        .parse::<WhereRule>()
        .unwrap_err();
    let shown = e.to_string();
    let lines: Vec<_> = shown.lines().collect();
    assert_eq!(lines[1], "  raw_syscalls:*=fields.id ==", "{shown}");
    assert!(lines[2].find('^').unwrap() >= 2 + 15, "{shown}");
}

#[test]
fn a_field_no_matching_format_has_is_refused_at_start() {
    let format = sys_enter_format();
    let formats = vec![("raw_syscalls".to_string(), "sys_enter".to_string(), format)];
    let ok: WhereRule = "fields.args[0] == 1".parse().unwrap();
    Filter::check_fields(&[ok], &formats).unwrap();
    let bad: WhereRule = "fields.id == 1 && fields.argz[0] == 1".parse().unwrap();
    let e = Filter::check_fields(&[bad], &formats).unwrap_err();
    assert!(e.message.contains("fields.argz"), "{e}");
    assert!(e.message.contains("raw_syscalls:sys_enter"), "{e}");
    assert_eq!(e.at.0, 18, "{e}");
    // A rule for other events is not checked against these.
    let other: WhereRule = "sched:*=fields.prev_pid == 1".parse().unwrap();
    Filter::check_fields(&[other], &formats).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any text is a rule or an error, never a panic; an error's caret is inside or
    /// just past the text.
    #[test]
    fn any_text_is_a_rule_or_an_error(text in "\\PC{0,40}") {
        if let Err(e) = text.parse::<WhereRule>() {
            prop_assert!(e.at.0 <= text.chars().count() + 1, "{e}");
            let _ = e.to_string();
        }
    }

    /// Text made of CEL's own tokens (more often near-valid): the same.
    #[test]
    fn cel_like_text_is_a_rule_or_an_error(
        parts in proptest::collection::vec(
            prop::sample::select(vec![
                "fields", ".", "args", "[", "]", "0", "1u", "%", "==", "!=", "&&", "||", "!",
                "(", ")", "pid", "'a'", "\"b\"", "has", "size", ",", "?", ":", "=", "x",
                "raw_syscalls:*", "in", "[1,2]", "{", "}", "-", "1.5", "b'\\x00'", "\\",
            ]),
            0..16,
        )
    ) {
        let text = parts.concat();
        if let Ok(rule) = text.parse::<WhereRule>() {
            // A rule that parsed evaluates without a panic.
            let f = Filter::new(vec![rule], vec![], vec![]).unwrap();
            let prepared = sys_enter();
            if let Some(ff) = f.for_format(&prepared) {
                let _ = ff.keep(&prepared, &stamp(1), &record(1, [1; 6]), Endian::Little);
            }
        }
    }
}
