//! Register commands against what the kernel really does.
//!
//! 1. Pure: the schema computed for a register command recorded on a real kernel
//!    equals the format file a 6.12 kernel printed for it (garbage array lengths aside),
//!    checked line by line with the one type rule (`resolve_decl`) on the kernel's text,
//!    and `format_file::parse_format` reads that text as exactly the computed schema.
//! 2. Live (needs a kernel with user_events, i.e. the test VM:
//!    `shared/vm/run.sh target/debug/deps/register_kernel-* --nocapture`): every command
//!    of a table is written to `dynamic_events`; the kernel must accept exactly what
//!    `RegisterCommand::parse` accepts (except the documented cases where uevrec is
//!    stricter, which the kernel must accept), the format file must equal
//!    `expected_format_file`, and the `-:` form printed by `Display` must delete the event.
//!    Without user_events it prints `SKIP: ...` and returns.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use uevrec_parsers::parse_format;
use uevrec_parsers::resolve_decl;
use uevrec_parsers::{EventFormat, Field};
use uevrec_samples::register::{
    CommandForm, RegisterCommand, SCALAR_TYPES, strip_bracket_contents,
};

/// The one "this test needs X" helper, shared with the root crate's tests.
#[path = "../../tests/common/tier.rs"]
mod tier;
use tier::Tier;

/// The format file a 6.12 kernel showed for
/// `test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg`
/// (recorded from a real 6.12 kernel, not derived), garbage `b[1055984226]` included.
const KERNEL_FORMAT: &str = "name: test
ID: 1117
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;
\tfield:char b[1055984226];\toffset:12;\tsize:8;\tsigned:1;
\tfield:__rel_loc char msg[];\toffset:20;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] dmsg;\toffset:24;\tsize:4;\tsigned:1;

print fmt: \"a=%u b=%s msg=%s dmsg=%s\", REC->a, REC->b, __get_rel_str(msg), __get_str(dmsg)
";

const EXAMPLE: &str = "test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg";

/// One `field:` line split by plain string operations: (decl, offset, size, signed).
type Line<'a> = (&'a str, u32, u32, bool);

/// The `field:` lines of a format file, common ones first, split at the first blank line.
fn field_lines(text: &str) -> (Vec<Line<'_>>, Vec<Line<'_>>) {
    let body = text.split_once("format:\n").map_or("", |(_, b)| b);
    let (common, rest) = body.split_once("\n\n").unwrap_or((body, ""));
    (field_block(common), field_block(rest))
}

/// The `field:` lines of one block of a format file.
fn field_block(block: &str) -> Vec<Line<'_>> {
    block
        .lines()
        .filter_map(|l| l.trim().strip_prefix("field:"))
        .map(|l| {
            let parts: Vec<&str> = l.split(";\t").collect();
            let num = |i: usize, key: &str| -> u32 {
                parts
                    .get(i)
                    .map(|p| p.trim_end_matches(';'))
                    .and_then(|p| p.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("bad `{key}` in `{l}`"))
            };
            (
                parts[0],
                num(1, "offset:"),
                num(2, "size:"),
                num(3, "signed:") == 1,
            )
        })
        .collect()
}

/// A field as the one type rule reads the kernel's line.
fn from_kernel_line(&(decl, offset, size, signed): &Line<'_>) -> Field {
    let d = resolve_decl(decl, size, Some(signed)).unwrap();
    Field {
        name: d.name,
        type_text: d.type_text,
        offset,
        size,
        signed: Some(signed),
        kind: d.kind,
    }
}

/// Compare two fields: everything, but type texts without their bracket contents.
fn assert_same_field(computed: &Field, kernel: &Field, context: &str) {
    let mut a = computed.clone();
    let mut b = kernel.clone();
    a.type_text = strip_bracket_contents(&a.type_text);
    b.type_text = strip_bracket_contents(&b.type_text);
    assert_eq!(a, b, "{context}");
}

/// Assert that `format` (computed) describes the kernel's format file `text`.
fn assert_matches_kernel_text(format: &EventFormat, text: &str, context: &str) {
    let (common, fields) = field_lines(text);
    assert_eq!(
        format.common_fields.len(),
        common.len(),
        "{context}: common fields"
    );
    assert_eq!(format.fields.len(), fields.len(), "{context}: fields");
    for (f, line) in format.common_fields.iter().zip(&common) {
        assert_same_field(f, &from_kernel_line(line), context);
    }
    for (f, line) in format.fields.iter().zip(&fields) {
        assert_same_field(f, &from_kernel_line(line), context);
    }
    let print_fmt = text.lines().find_map(|l| l.strip_prefix("print fmt: "));
    assert_eq!(
        Some(format.print_fmt.as_str()),
        print_fmt,
        "{context}: print fmt"
    );
}

/// Assert that `parse_format` reads the kernel's `text` as exactly `format` (type texts
/// compared without bracket contents).
fn assert_parse_format_agrees(format: &EventFormat, text: &str, context: &str) {
    let strip = |f: &EventFormat| {
        let mut f = f.clone();
        for field in f.common_fields.iter_mut().chain(f.fields.iter_mut()) {
            field.type_text = strip_bracket_contents(&field.type_text);
        }
        f
    };
    let parsed = parse_format(text).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(strip(format), strip(&parsed), "{context}: parse_format");
}

#[test]
fn kernel_facts_example_schema_equals_kernel_format() {
    let cmd = RegisterCommand::parse(EXAMPLE).unwrap();
    let format = cmd.event_format(1117);
    assert_eq!((format.name.as_str(), format.id), ("test", 1117));
    assert_matches_kernel_text(&format, KERNEL_FORMAT, "the recorded kernel example");
    assert_parse_format_agrees(&format, KERNEL_FORMAT, "the recorded kernel example");
    // The other garbage the kernel was seen to print changes nothing.
    for garbage in ["b[-2121988123]", "b[]", "b[8]"] {
        let text = KERNEL_FORMAT.replace("b[1055984226]", garbage);
        assert_matches_kernel_text(&format, &text, garbage);
        assert_parse_format_agrees(&format, &text, garbage);
    }
    // Type texts: the true count for the fixed array, brackets moved next to the type.
    let types: Vec<&str> = format.fields.iter().map(|f| f.type_text.as_str()).collect();
    assert_eq!(
        types,
        ["u32", "char[8]", "__rel_loc char[]", "__data_loc char[]"]
    );
}

#[test]
fn expected_format_file_is_the_kernel_text() {
    let cmd = RegisterCommand::parse(EXAMPLE).unwrap();
    let expected = cmd.expected_format_file(1117);
    assert_eq!(expected, KERNEL_FORMAT.replace("b[1055984226]", "b[]"));
    assert_eq!(
        strip_bracket_contents(&expected),
        strip_bracket_contents(KERNEL_FORMAT)
    );
    // An event without fields: two blank lines, empty print fmt.
    let bare = RegisterCommand::parse("bare")
        .unwrap()
        .expected_format_file(5);
    assert!(bare.ends_with("signed:1;\n\n\nprint fmt: \"\"\n"), "{bare}");
    let bare_cmd = RegisterCommand::parse("bare").unwrap();
    assert_parse_format_agrees(&bare_cmd.event_format(5), &bare, "bare");
}

/// How the kernel and uevrec should judge one command.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    /// Both accept.
    Accept,
    /// Both refuse.
    Refuse,
    /// The kernel accepts, uevrec refuses on purpose (see the register module docs).
    Stricter,
}

/// Field lists tried on the live kernel (each under its own event name).
const TABLE: &[(&str, Verdict)] = &[
    (
        "u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h",
        Verdict::Accept,
    ),
    (
        "int a; unsigned int b; short c; unsigned short d; char e; unsigned char f",
        Verdict::Accept,
    ),
    (
        "char[8] a; unsigned char[16] b; char[1] c; char[1024] d",
        Verdict::Accept,
    ),
    ("char[0x10] a; char[010] b", Verdict::Accept),
    ("__data_loc char[] a; __rel_loc char[] b", Verdict::Accept),
    (
        "__data_loc u8[] a; __data_loc s8[] b; __data_loc u32[] c; __data_loc int[] d",
        Verdict::Accept,
    ),
    (
        "__data_loc unsigned char[] a; __rel_loc u8[] b",
        Verdict::Accept,
    ),
    ("__data_loc char a; __data_loc whatever b", Verdict::Accept),
    (
        "struct foo a 1; struct bar b 20; struct baz c 5000",
        Verdict::Accept,
    ),
    ("u32 a;u8 b;; ;u16 c", Verdict::Accept),
    ("", Verdict::Accept),
    ("long a", Verdict::Refuse),
    ("unsigned long a", Verdict::Refuse),
    ("long long a", Verdict::Refuse),
    ("signed char a", Verdict::Refuse),
    ("bool a", Verdict::Refuse),
    ("s128 a", Verdict::Refuse),
    ("char[0] a", Verdict::Refuse),
    ("char[] a", Verdict::Refuse),
    ("char[1025] a", Verdict::Refuse),
    ("u8[8] a", Verdict::Refuse),
    ("s8[4] a", Verdict::Refuse),
    ("int[2] a", Verdict::Refuse),
    ("struct foo a", Verdict::Refuse),
    ("struct foo a 0", Verdict::Refuse),
    ("u32 a 4", Verdict::Refuse),
    ("u32 a ; u8 b", Verdict::Refuse),
    ("u32  a", Verdict::Refuse),
    ("u32", Verdict::Refuse),
    ("char[08] a", Verdict::Refuse),
    ("char[0000008] a", Verdict::Refuse),
    ("u32 a-b", Verdict::Stricter),
    ("char[8]x a", Verdict::Stricter),
    ("struct a.b c 4", Verdict::Stricter),
];

fn tracefs() -> PathBuf {
    PathBuf::from(
        std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into()),
    )
}

/// Write one line to `dynamic_events` (append mode: opening with O_TRUNC would delete
/// every dynamic event). Ok(()) when the kernel accepted it.
fn dynamic_events(tracefs: &Path, line: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .append(true)
        .open(tracefs.join("dynamic_events"))?;
    f.write_all(line.as_bytes())
}

/// Check the live format file of the event `name` against `cmd` (the expected text, with
/// the kernel's garbage array lengths removed, and the schema, line by line).
fn check_live_format(tracefs: &Path, name: &str, cmd: &RegisterCommand, context: &str) -> String {
    let path = tracefs.join("events/user_events").join(name).join("format");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{context}: {e}"));
    let id: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("ID: "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{context}: no ID in {text}"));
    assert_eq!(
        strip_bracket_contents(&text),
        strip_bracket_contents(&cmd.expected_format_file(id)),
        "{context}"
    );
    assert_matches_kernel_text(&cmd.event_format(id), &text, context);
    assert_parse_format_agrees(&cmd.event_format(id), &text, context);
    text
}

#[test]
fn live_kernel_agrees_with_parse() {
    let tracefs = tracefs();
    if !tracefs.join("user_events_status").exists() {
        tier::skip(
            Tier::Vm,
            &format!(
                "no user_events in this kernel ({} has no user_events_status); \
                 scripts/vm-test.sh runs this test binary in the VM",
                tracefs.display()
            ),
        );
        return;
    }
    let mut checked = 0;
    for (i, &(fields, verdict)) in TABLE.iter().enumerate() {
        let name = format!("uevrec_reg_{}_{i}", std::process::id());
        let line = format!("u:{name} {fields}");
        let ours = RegisterCommand::parse(&line);
        let kernel = dynamic_events(&tracefs, &line);
        let context = format!("`{line}`: ours {ours:?}, kernel {kernel:?}");
        match verdict {
            Verdict::Accept => assert!(ours.is_ok() && kernel.is_ok(), "{context}"),
            Verdict::Refuse => {
                assert!(ours.is_err(), "{context}");
                let err = kernel.as_ref().expect_err(&context);
                assert_eq!(err.kind(), ErrorKind::InvalidInput, "{context}");
            }
            Verdict::Stricter => assert!(ours.is_err() && kernel.is_ok(), "{context}"),
        }
        if kernel.is_err() {
            continue;
        }
        let dir = tracefs.join("events/user_events").join(&name);
        if let Ok(cmd) = &ours {
            let text = check_live_format(&tracefs, &name, cmd, &context);
            println!("{text}");
            // dynamic_events lists the event in our canonical form.
            let listed = fs::read_to_string(tracefs.join("dynamic_events")).unwrap();
            assert!(
                listed.lines().any(|l| l == cmd.to_string()),
                "{context}: listed {listed}"
            );
            // The `-:` form deletes it.
            let delete = cmd.with_form(CommandForm::DynamicDelete).to_string();
            dynamic_events(&tracefs, &delete).unwrap_or_else(|e| panic!("{delete}: {e}"));
            assert!(!dir.exists(), "{delete} left {}", dir.display());
            checked += 1;
        } else {
            // Stricter cases: clean up with the kernel's own listing of the event.
            let listed = fs::read_to_string(tracefs.join("dynamic_events")).unwrap();
            let own = listed
                .lines()
                .find(|l| l.starts_with(&format!("u:{name} ")))
                .unwrap();
            dynamic_events(&tracefs, &format!("-:{}", &own[2..])).unwrap();
        }
    }
    println!(
        "live kernel agreed on {} commands ({checked} format files compared)",
        TABLE.len()
    );
}

/// Pieces the differential test builds fields from: valid and invalid types (with every
/// accepted scalar from `SCALAR_TYPES`), odd names, sizes and spacing.
const MORE_TYPES: &[&str] = &[
    "long",
    "unsigned long",
    "signed char",
    "bool",
    "char[4]",
    "char[0]",
    "char[]",
    "char[1024]",
    "char[1025]",
    "char[0x20]",
    "char[08]",
    "char[07]",
    "unsigned char[3]",
    "u8[2]",
    "int[2]",
    "char[2]x",
    "__data_loc char[]",
    "__rel_loc char[]",
    "__data_loc u8[]",
    "__rel_loc unsigned char[]",
    "__data_loc int[]",
    "__data_loc x",
    "__rel_loc  char[]",
    "struct foo",
    "struct a.b",
    "unsigned",
    "__data_loc",
    "float",
    "u32[]",
    "char[+3]",
];
const NAMES: &[&str] = &["a", "b_1", "_x", "x-y", "a[2]", "9z", "", "name.dot", "é"];
const TAILS: &[&str] = &["", "", "", " 4", " 0", " 16", " x", " ", "  "];
const SEPARATORS: &[&str] = &[";", "; ", ";  ", " ;", ";;", "; ;"];

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        from[(r >> 33) as usize % from.len()]
    }
}

/// Every type the generator picks from.
fn all_types() -> Vec<&'static str> {
    SCALAR_TYPES
        .iter()
        .map(|&(t, _)| t)
        .chain(MORE_TYPES.iter().copied())
        .collect()
}

/// `count` generated fields (valid or not) joined by generated separators.
fn generated_fields(rng: &mut Rng, types: &[&str], count: u64) -> String {
    let mut fields = String::new();
    for k in 0..count {
        if k > 0 {
            fields.push_str(rng.pick(SEPARATORS));
        }
        fields.push_str(rng.pick(types));
        fields.push(' ');
        fields.push_str(rng.pick(NAMES));
        fields.push_str(rng.pick(TAILS));
    }
    fields
}

#[test]
fn generated_commands_read_back_by_parse_format() {
    let types = all_types();
    let mut rng = Rng(0x00c0_ffee);
    let mut accepted = 0;
    for i in 0..3000u64 {
        let Ok(cmd) = RegisterCommand::parse(&format!(
            "ev{i} {}",
            generated_fields(&mut rng, &types, i % 6)
        )) else {
            continue;
        };
        let text = cmd.expected_format_file(100 + i as u32);
        assert_parse_format_agrees(&cmd.event_format(100 + i as u32), &text, &text);
        accepted += 1;
    }
    assert!(accepted > 300, "only {accepted} generated commands parsed");
}

/// Delete an event the kernel accepted, by the kernel's own listing of it. Returns false
/// for an event with an empty field name (`u32 ` with a trailing space, `struct t  4`), which
/// `dynamic_events` cannot delete: its own listing does not match it (ENOENT). Such
/// leftovers only live until the VM powers off.
fn delete_listed(tracefs: &Path, name: &str) -> bool {
    let listed = fs::read_to_string(tracefs.join("dynamic_events")).unwrap();
    let prefix = format!("u:{name}");
    let own = listed
        .lines()
        .find(|l| *l == prefix || l.starts_with(&format!("{prefix} ")))
        .unwrap_or_else(|| panic!("{name} not listed in dynamic_events:\n{listed}"));
    match dynamic_events(tracefs, &format!("-:{}", &own[2..])) {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::NotFound && (own.ends_with(' ') || own.contains("  ")) => {
            false
        }
        Err(e) => panic!("{own}: {e}"),
    }
}

#[test]
fn live_kernel_differential() {
    use uevrec_samples::register::{FieldProblem, RegisterError};
    let tracefs = tracefs();
    if !tracefs.join("user_events_status").exists() {
        tier::skip(
            Tier::Vm,
            "no user_events in this kernel (scripts/vm-test.sh runs it in the VM)",
        );
        return;
    }
    // UEVREC_DIFF_SEED / UEVREC_DIFF_COUNT explore further; the defaults are what CI runs.
    let env = |key: &str, default: u64| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seed = env("UEVREC_DIFF_SEED", 0x5eed_0001).max(1);
    let count = env("UEVREC_DIFF_COUNT", 400);
    let mut rng = Rng(seed);
    let types = all_types();
    let (mut both_ok, mut both_err, mut stricter, mut undeletable) = (0, 0, 0, 0);
    for i in 0..count {
        let name = format!("uevrec_diff_{}_{i}", std::process::id());
        let fields = generated_fields(&mut rng, &types, i % 4);
        let line = format!("u:{name} {fields}");
        let ours = RegisterCommand::parse(&line);
        let kernel = dynamic_events(&tracefs, &line);
        let context = format!("seed {seed:#x} #{i} `{line}`: ours {ours:?}, kernel {kernel:?}");
        match (&ours, &kernel) {
            (Ok(cmd), Ok(())) => {
                check_live_format(&tracefs, &name, cmd, &context);
                let delete = cmd.with_form(CommandForm::DynamicDelete).to_string();
                dynamic_events(&tracefs, &delete).unwrap_or_else(|e| panic!("{delete}: {e}"));
                both_ok += 1;
            }
            (Err(_), Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{context}");
                both_err += 1;
            }
            (Err(err), Ok(())) => {
                // Only the documented strictness may refuse what the kernel takes.
                let documented = matches!(
                    err,
                    RegisterError::Field {
                        problem: FieldProblem::BadFieldName(_)
                            | FieldProblem::BadStructTag(_)
                            | FieldProblem::AfterBracket(_)
                            | FieldProblem::MissingElementType
                            | FieldProblem::ExtraSpace,
                        ..
                    }
                );
                assert!(documented, "{context}");
                if !delete_listed(&tracefs, &name) {
                    undeletable += 1;
                }
                stricter += 1;
            }
            (Ok(_), Err(_)) => panic!("uevrec accepts what the kernel refuses: {context}"),
        }
    }
    println!(
        "differential vs the live kernel: {both_ok} accepted by both (format files equal), \
         {both_err} refused by both, {stricter} refused only by uevrec's documented strictness \
         ({undeletable} of those, with an empty field name, dynamic_events cannot delete)"
    );
    assert!(
        both_ok > 20 && both_err > 20,
        "the generator must exercise both sides"
    );
}
