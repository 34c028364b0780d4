use super::*;
use proptest::prelude::*;
use record_vars::{FieldReader, Fields, RecordVars};
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

/// raw_syscalls:sys_enter, prepared (also for the tests of the filter's users).
pub(crate) fn sys_enter() -> PreparedFormat {
    PreparedFormat::new(&sys_enter_format(), "raw_syscalls", "sys_enter", None)
}

/// A sys_enter record of syscall `id` with `args`.
pub(crate) fn record(id: i64, args: [u64; 6]) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&id.to_le_bytes());
    for a in args {
        raw.extend_from_slice(&a.to_le_bytes());
    }
    raw
}

/// The filter of `--where` `rules`.
pub(crate) fn filter(rules: &[&str]) -> Arc<Filter> {
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
    let mut ff = f.for_format(&prepared).unwrap();
    let mut kept = Vec::new();
    for seq in 1..=300u64 {
        let raw = record(110, [424242, seq, 0, 0, 0, 0]);
        if ff.keep(&prepared, &stamp(7), &raw, Endian::Little, None) {
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
    let mut ff = f.for_format(&prepared).unwrap();
    let raw = record(110, [0; 6]);
    assert!(ff.keep(&prepared, &stamp(7), &raw, Endian::Little, None));
    assert!(!ff.keep(&prepared, &stamp(8), &raw, Endian::Little, None));
}

#[test]
fn a_field_missing_from_a_record_is_not_kept_and_counted_as_such() {
    let f = filter(&["fields.args[1] == 5"]);
    let prepared = sys_enter();
    let mut ff = f.for_format(&prepared).unwrap();
    // Cut short: args does not decode.
    let raw = record(110, [0, 5, 0, 0, 0, 0]);
    assert!(!ff.keep(&prepared, &stamp(1), &raw[..20], Endian::Little, None));
    assert!(ff.keep(&prepared, &stamp(1), &raw, Endian::Little, None));
    let c = f.counted()[0].1;
    assert_eq!((c.kept, c.filtered, c.filter_error), (1, 0, 1));
}

#[test]
fn has_tells_whether_a_field_is_there() {
    let f = filter(&["has(fields.id) && !has(fields.nope)"]);
    let prepared = sys_enter();
    let mut ff = f.for_format(&prepared).unwrap();
    assert!(ff.keep(
        &prepared,
        &stamp(1),
        &record(1, [0; 6]),
        Endian::Little,
        None
    ));
}

#[test]
fn a_rule_for_a_selector_applies_to_its_events_only() {
    let f = filter(&["sched:*=pid == 1"]);
    assert!(f.for_format(&sys_enter()).is_none());
    let f = filter(&["raw_syscalls:sys_*=pid == 1", "fields.id == 3"]);
    let prepared = sys_enter();
    let mut ff = f.for_format(&prepared).unwrap();
    assert!(ff.keep(
        &prepared,
        &stamp(1),
        &record(3, [0; 6]),
        Endian::Little,
        None
    ));
    assert!(!ff.keep(
        &prepared,
        &stamp(1),
        &record(4, [0; 6]),
        Endian::Little,
        None
    ));
    assert!(!ff.keep(
        &prepared,
        &stamp(2),
        &record(3, [0; 6]),
        Endian::Little,
        None
    ));
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
            if let Some(mut ff) = f.for_format(&prepared) {
                let _ = ff.keep(&prepared, &stamp(1), &record(1, [1; 6]), Endian::Little, None);
            }
        }
    }
}

/// CEL's interpreter on `text` over the sys_enter record `raw`: Ok(kept) or Err (error).
fn cel_answer(
    text: &str,
    prepared: &PreparedFormat,
    raw: &[u8],
    stamp: &RecordStamp,
) -> Result<bool, ()> {
    cel_answer_of(text, prepared, raw, stamp, None)
}

/// CEL's interpreter on `text` over record `raw` of `prepared` (plain or EventHeader),
/// written by `who`.
fn cel_answer_of(
    text: &str,
    prepared: &PreparedFormat,
    raw: &[u8],
    stamp: &RecordStamp,
    who: Option<Who<'_>>,
) -> Result<bool, ()> {
    let condition = Condition::parse(text).map_err(|_| ())?;
    let readers: Vec<FieldReader> = prepared
        .format()
        .fields
        .iter()
        .map(|f| FieldReader {
            name: f.name.as_str().into(),
            plan: FieldPlan::of(f),
        })
        .collect();
    let eventheader = prepared.eventheader().map(|tp| (tp, event_parts(raw)));
    let vars = RecordVars {
        system: prepared.system(),
        event: prepared.event(),
        stamp,
        fields: Fields {
            readers: &readers,
            raw,
            endian: Endian::Little,
        },
        eventheader: eventheader.map(|(tp, parts)| eventheader_vars(tp, parts)),
        eventheader_fields: eventheader.map(|(_, parts)| eventheader_fields(parts)),
        context: context_vars::RecordContext::new(who, stamp),
    };
    let mut context = cel::Context::with_env(Arc::new(cel::Env::stdlib()));
    context.set_variable_resolver(&vars);
    match condition.program().execute(&context) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        _ => Err(()),
    }
}

/// The compiled tree on `text` (its integer comparisons specialized): None when it does
/// not compile it.
fn fast_answer(
    text: &str,
    prepared: &PreparedFormat,
    raw: &[u8],
    stamp: &RecordStamp,
) -> Option<Result<bool, ()>> {
    fast_answer_of(text, prepared, raw, stamp, None)
}

/// [`fast_answer`] over record `raw` of `prepared` (plain or EventHeader), written by
/// `who`.
fn fast_answer_of(
    text: &str,
    prepared: &PreparedFormat,
    raw: &[u8],
    stamp: &RecordStamp,
    who: Option<Who<'_>>,
) -> Option<Result<bool, ()>> {
    let condition = Condition::parse(text).ok()?;
    let eventheader = prepared.eventheader();
    let plans: Vec<(String, FieldPlan)> = prepared
        .format()
        .fields
        .iter()
        .filter(|_| eventheader.is_none())
        .map(|f| (f.name.clone(), FieldPlan::of(f)))
        .collect();
    let scope = fast::Scope {
        system: prepared.system(),
        event: prepared.event(),
        fields: &plans,
        eventheader: eventheader.is_some(),
    };
    let fast = fast::Fast::compile(condition.program().expression(), &scope)?;
    let context = context_vars::RecordContext::new(who, stamp);
    let record = fast::Record {
        stamp,
        raw,
        endian: Endian::Little,
        eventheader: eventheader.map(|tp| eventheader_vars(tp, event_parts(raw))),
        context: &context,
    };
    // The integer comparisons specialized answer as the general tree does.
    let general = fast.holds(&record);
    let tree = fast.specialized();
    let specialized = tree.holds(&record);
    assert_eq!(general, specialized, "{text}");
    // And so do the leaves alone, where the tree is made of them.
    if let Some(leaves) = tree.leaves() {
        let alone = fast::Leaf::all_hold(&leaves, stamp, raw, Endian::Little);
        assert_eq!(alone, specialized, "{text} (leaves)");
    }
    Some(specialized)
}

/// Conditions on who wrote a record and on an EventHeader event's name and header are
/// compiled, and answer as CEL's interpreter does: on plain and EventHeader events, a
/// record whose metadata does not read, with and without a tracker.
#[test]
fn context_and_header_conditions_are_compiled_and_answer_as_cel() {
    let mut tracker = uevrec_parsers::ContextTracker::new();
    tracker.apply(
        None,
        uevrec_parsers::ContextUpdate::Comm {
            tid: 7,
            comm: b"ng\"inx",
        },
    );
    let span = span(TRACE, "GET /x", 503);
    let (plain, otel) = (sys_enter(), otel_span_format());
    let plain_raw = record(1, [0; 6]);
    let cases: [(&PreparedFormat, &[u8]); 4] = [
        (&plain, &plain_raw),
        (&otel, &span),
        // Cut inside the metadata: no event name, the name's level.
        (&otel, &span[..12]),
        (&otel, &span[..2]),
    ];
    let texts = [
        "comm == 'ng\"inx'",
        "comm != 'nginx' && k8s_namespace == ''",
        "comm + container == 'ng\"inx'",
        "comm < 'z' || level == 4",
        "level == 4",
        "level >= 3 && opcode == 0 && keyword == 1",
        "provider == 'otel' && name == 'Span'",
        "name == 'Span' || true",
        "level + 1 == 5",
        "keyword > 0",
        "unit == '' && cgroup == ''",
    ];
    for (prepared, raw) in cases {
        for pid in [7, 8] {
            for who in [
                None,
                Some(Who {
                    tracker: &tracker,
                    cgroup: None,
                }),
            ] {
                for text in texts {
                    let fast = fast_answer_of(text, prepared, raw, &stamp(pid), who);
                    assert!(fast.is_some(), "{text} is not compiled");
                    assert_eq!(
                        fast.unwrap(),
                        cel_answer_of(text, prepared, raw, &stamp(pid), who),
                        "{text} on {} ({} bytes), pid {pid}",
                        prepared.event(),
                        raw.len()
                    );
                }
            }
        }
    }
    // An EventHeader event's fields stay with the interpreter.
    assert_eq!(
        fast_answer_of("fields.PartB.name == 'x'", &otel, &span, &stamp(7), None),
        None
    );
}

#[test]
fn the_benchmarked_conditions_are_compiled() {
    let prepared = sys_enter();
    let raw = record(110, [424242, 3, 0, 0, 0, 0]);
    for text in [
        "fields.args[1] % 3 == 0",
        "fields.id == 110 && fields.args[0] == 424242 && pid > 0 && system == 'raw_syscalls' && fields.args[1] % 3 == 0",
    ] {
        assert_eq!(
            fast_answer(text, &prepared, &raw, &stamp(7)),
            Some(Ok(true)),
            "{text}"
        );
    }
    // The edges, answered as CEL answers them.
    let raw = record(-1, [u64::MAX, 3, 0, 0, 0, 0]);
    for text in [
        "(9223372036854775807 + 1) == 0",
        "1 == 'a'",
        "1 < 'a'",
        "(fields.nope == 1) || true",
        "(fields.nope == 1) && false",
        "fields.args[6] == 0",
        "fields.args[0] > 5",
        "fields.args[0] % 2 == 1",
        "fields.args[1] % 0 == 0",
        "5 < fields.args[1] && 3 >= fields.args[1] && -2 != fields.id",
        "fields.args[1] % -2 == 1",
        "fields.id % 4 == -1",
        "fields.id / 0 == 1",
        "fields.id < 0 && system + event == 'raw_syscallssys_enter'",
    ] {
        let fast = fast_answer(text, &prepared, &raw, &stamp(7));
        assert!(fast.is_some(), "{text} is not compiled");
        assert_eq!(
            fast.unwrap(),
            cel_answer(text, &prepared, &raw, &stamp(7)),
            "{text}"
        );
    }
}

/// A CEL expression of the compiled subset, with values that reach its edges (overflow,
/// division by zero, out-of-range indexes, missing fields, mixed types).
fn subset_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "fields.id",
            "fields.args[0]",
            "fields.args[1]",
            "fields.args[5]",
            "fields.args[6]",
            "fields.args[-1]",
            "fields.nope",
            "pid",
            "tid",
            "cpu",
            "system",
            "event",
            "comm",
            "k8s_pod",
            "level",
            "name",
            "'raw_syscalls'",
            "'a'",
            "true",
            "false",
            "0",
            "1",
            "3",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
        ])
        .prop_map(str::to_string),
        any::<i32>().prop_map(|n| n.to_string()),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        (
            inner.clone(),
            prop::sample::select(vec![
                "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
            ]),
            inner,
        )
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
            .boxed()
            .prop_union(Just("!true".to_string()).boxed())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The compiled tree answers as CEL's interpreter does, errors included.
    #[test]
    fn the_compiled_tree_answers_as_cel(
        text in subset_expr(),
        args in prop::array::uniform6(prop_oneof![Just(0u64), Just(3), Just(u64::MAX), any::<u64>()]),
        id in prop_oneof![Just(110i64), Just(-1), any::<i64>()],
        pid in any::<u32>(),
    ) {
        let prepared = sys_enter();
        let raw = record(id, args);
        let s = stamp(pid);
        if let Some(fast) = fast_answer(&text, &prepared, &raw, &s) {
            prop_assert_eq!(fast, cel_answer(&text, &prepared, &raw, &s), "{}", text);
        }
    }

    /// Leaves (`X OP K`, `X % D OP K`, either side), with constants at and beside the
    /// values read: each answers as CEL's interpreter does.
    #[test]
    fn leaves_answer_as_cel(
        x in prop::sample::select(vec!["fields.id", "fields.args[0]", "fields.args[1]", "pid", "tid", "cpu"]),
        d in prop_oneof![Just(None), Just(Some(3i64)), Just(Some(-2)), Just(Some(1)), Just(Some(i64::MIN)), any::<i64>().prop_map(Some)],
        op in prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]),
        k in prop_oneof![-3i64..=4, Just(i64::MAX), Just(i64::MIN), any::<i64>()],
        flip in any::<bool>(),
        id in prop_oneof![Just(3i64), Just(-1), Just(i64::MIN), any::<i64>()],
        arg in prop_oneof![Just(3u64), Just(0), Just(u64::MAX), Just(1 << 63), any::<u64>()],
        pid in 0u32..5,
    ) {
        let x = match d {
            Some(d) => format!("({x} % {d})"),
            None => x.to_string(),
        };
        let text = if flip { format!("{k} {op} {x}") } else { format!("{x} {op} {k}") };
        let prepared = sys_enter();
        let raw = record(id, [arg, arg, 0, 0, 0, 0]);
        let s = stamp(pid);
        let fast = fast_answer(&text, &prepared, &raw, &s);
        prop_assert!(fast.is_some(), "{} is not compiled", text);
        prop_assert_eq!(fast.unwrap(), cel_answer(&text, &prepared, &raw, &s), "{}", text);
    }
}

/// An OpenTelemetry span as `opentelemetry-user-events-trace` writes it (Common Schema
/// 4.0, abridged): `__csver__`, `PartA` {`time`, `ext_dt_traceId`}, `PartB`
/// {`_typeName`, `name`, `kind` (i8)}, `PartC` {`http.status` (i64), `tags` (an
/// array of strings), `peer` {`port` (u16, network order)}}, and a repeated `PartC`
/// key (`dup`, twice).
fn span(trace_id: &str, name: &str, status: i64) -> Vec<u8> {
    let mut meta = b"Span\0".to_vec();
    let mut field = |name: &str, enc: &[u8]| {
        meta.extend_from_slice(name.as_bytes());
        meta.push(0);
        meta.extend_from_slice(enc);
    };
    field("__csver__", &[0x04]);
    field("PartA", &[0x81, 2]);
    field("time", &[0x07]);
    field("ext_dt_traceId", &[0x07]);
    field("PartB", &[0x81, 3]);
    field("_typeName", &[0x07]);
    field("name", &[0x07]);
    field("kind", &[0x82, 2]);
    field("PartC", &[0x81, 5]);
    field("http.status;tag=x", &[0x85, 2]);
    field("tags", &[0x47]);
    field("peer", &[0x81, 1]);
    field("port", &[0x83, 16]);
    field("dup", &[0x02]);
    field("dup", &[0x02]);
    let mut payload = 1024u32.to_le_bytes().to_vec();
    let z = |p: &mut Vec<u8>, s: &str| {
        p.extend_from_slice(s.as_bytes());
        p.push(0);
    };
    z(&mut payload, "2026-12-06T03:00:00Z");
    z(&mut payload, trace_id);
    z(&mut payload, "Span");
    z(&mut payload, name);
    payload.push(0xfe); // kind -2
    payload.extend_from_slice(&status.to_le_bytes());
    payload.extend_from_slice(&2u16.to_le_bytes());
    z(&mut payload, "a");
    z(&mut payload, "b");
    payload.extend_from_slice(&8080u16.to_be_bytes());
    payload.extend_from_slice(&[1, 2]);
    uevrec_parsers::eventheader::trace_entry(4, &meta, &payload)
}

fn otel_span_format() -> PreparedFormat {
    let format = uevrec_parsers::eventheader::tracepoint_format("otel_L4K1", 9);
    PreparedFormat::new(&format, "user_events", "otel_L4K1", None)
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

#[test]
fn eventheader_fields_are_read_from_the_decoded_payload() {
    let prepared = otel_span_format();
    let raw = span(TRACE, "GET /x", 503);
    for holds in [
        "fields.__csver__ == 1024",
        "fields.PartB.name == 'GET /x' && fields.PartB.kind == -2",
        "fields.PartB['_typeName'] == 'Span'",
        "fields.PartC['http.status'] >= 500",
        "'b' in fields.PartC.tags && size(fields.PartC.tags) == 2",
        "fields.PartC.peer.port == 8080",
        "fields.PartC.dup == 1 && fields.PartC['dup#2'] == 2",
        "fields.PartA.ext_dt_traceId.startsWith('0af7')",
        "has(fields.PartC) && !has(fields.PartD) && size(fields) == 4",
        "provider == 'otel' && name == 'Span' && level == 4 && keyword == 1 && opcode == 0",
        "fields.PartC.tags.exists(t, t == 'a')",
    ] {
        let f = filter(&[holds]);
        let mut ff = f.for_format(&prepared).unwrap();
        assert!(
            ff.keep(&prepared, &stamp(1), &raw, Endian::Little, None),
            "{holds}: {:?}",
            f.counted()
        );
    }
    let f = filter(&["fields.PartB.name == 'GET /y'"]);
    let mut ff = f.for_format(&prepared).unwrap();
    assert!(!ff.keep(&prepared, &stamp(1), &raw, Endian::Little, None));
    assert_eq!(f.counted()[0].1.filtered, 1);
}

#[test]
fn an_eventheader_field_missing_from_a_record_is_false_and_counted() {
    let prepared = otel_span_format();
    let f = filter(&["fields.PartD.x == 1", "fields.PartC.nope == 1"]);
    let mut ff = f.for_format(&prepared).unwrap();
    let raw = span(TRACE, "GET /x", 200);
    assert!(!ff.keep(&prepared, &stamp(1), &raw, Endian::Little, None));
    assert_eq!(f.counted()[0].1.filter_error, 1);
    // Cut short inside PartB: PartB.name does not decode.
    let f = filter(&["fields.PartB.name == 'GET /x'"]);
    let mut ff = f.for_format(&prepared).unwrap();
    let cut = raw.len() - 30;
    assert!(!ff.keep(&prepared, &stamp(1), &raw[..cut], Endian::Little, None));
    // A record that is not EventHeader at all (no header): every field missing.
    assert!(!ff.keep(&prepared, &stamp(1), &raw[..10], Endian::Little, None));
    assert!(ff.keep(&prepared, &stamp(1), &raw, Endian::Little, None));
    let c = f.counted()[0].1;
    assert_eq!((c.kept, c.filtered, c.filter_error), (1, 0, 2));
}

#[test]
fn context_variables_read_what_the_tracker_knows() {
    let mut tracker = uevrec_parsers::ContextTracker::new();
    tracker.apply(
        None,
        uevrec_parsers::ContextUpdate::Comm {
            tid: 7,
            comm: b"nginx",
        },
    );
    let f = filter(&["comm == 'nginx' && k8s_namespace == ''"]);
    let prepared = sys_enter();
    let mut ff = f.for_format(&prepared).unwrap();
    let raw = record(1, [0; 6]);
    let who = Some(Who {
        tracker: &tracker,
        cgroup: None,
    });
    assert!(ff.keep(&prepared, &stamp(7), &raw, Endian::Little, who));
    assert!(!ff.keep(&prepared, &stamp(8), &raw, Endian::Little, who));
    // Without a tracker (`--no-context`) every context variable is "".
    assert!(!ff.keep(&prepared, &stamp(7), &raw, Endian::Little, None));
    let c = f.counted()[0].1;
    assert_eq!((c.kept, c.filtered, c.filter_error), (1, 2, 0));
}

/// `--sample …,by=trace` over spans of 2,000 traces, 3 spans each with different
/// names and threads: every trace is kept or left out whole, about the ratio of them.
#[test]
fn spans_are_sampled_by_trace_id_a_trace_whole() {
    let f = Filter::new(
        vec![],
        vec!["user_events:otel_*=0.5,by=trace".parse().unwrap()],
        vec![],
    )
    .unwrap();
    let prepared = otel_span_format();
    let mut ff = f.for_format(&prepared).unwrap();
    let mut whole = 0;
    for t in 0..2000u64 {
        let id = format!(
            "{:016x}{:016x}",
            t.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            t.wrapping_mul(0xbf58_476d_1ce4_e5b9)
        );
        let kept: Vec<bool> = (0..3u32)
            .map(|s| {
                let raw = span(&id, &format!("op{s}"), 200);
                ff.keep(&prepared, &stamp(100 + s), &raw, Endian::Little, None)
            })
            .collect();
        assert!(kept.iter().all(|&k| k == kept[0]), "trace {id}: {kept:?}");
        whole += usize::from(kept[0]);
    }
    // Binomial: 1000 ± 5σ (σ ≈ 22.4).
    assert!((888..=1112).contains(&whole), "{whole}");
    let c = f.counted()[0].1;
    assert_eq!(c.kept + c.sampled, 6000);
}
