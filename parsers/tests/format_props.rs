//! Properties of `parse_format`:
//! - it never panics, on arbitrary text, on token soup, or on damaged valid files;
//! - a generated valid format text (random names with dots, fields of every kind, garbage
//!   array brackets, optional `signed:`, tabs or spaces, LF or CRLF, with or without a
//!   final newline and a `print fmt:` line) parses back to exactly the generated schema.
//!
//! The expected kinds come from the generator's own tables, not from the parser.

use proptest::prelude::*;
use uevrec_parsers::parse_format;
use uevrec_parsers::{Element, EventFormat, Field, FieldKind, LocKind};

/// Scalar types: (type text, size, signedness the name implies).
const SCALARS: &[(&str, u32, Option<bool>)] = &[
    ("u8", 1, Some(false)),
    ("s8", 1, Some(true)),
    ("char", 1, None),
    ("unsigned char", 1, Some(false)),
    ("bool", 1, Some(false)),
    ("u16", 2, Some(false)),
    ("s16", 2, Some(true)),
    ("short", 2, Some(true)),
    ("unsigned short", 2, Some(false)),
    ("u32", 4, Some(false)),
    ("s32", 4, Some(true)),
    ("int", 4, Some(true)),
    ("unsigned int", 4, Some(false)),
    ("pid_t", 4, Some(true)),
    ("xfs_agblock_t", 4, None),
    ("u64", 8, Some(false)),
    ("s64", 8, Some(true)),
    ("unsigned long", 8, Some(false)),
    ("void *", 8, None),
    ("struct file *", 8, None),
    ("const char *", 8, None),
];

/// Array element types: (type text, element).
const ELEMENTS: &[(&str, Element)] = &[
    ("char", Element::Char),
    ("unsigned char", Element::Byte),
    ("u8", Element::Byte),
    ("__u8", Element::Byte),
    (
        "u16",
        Element::Integer {
            size: 2,
            signed: false,
        },
    ),
    (
        "s16",
        Element::Integer {
            size: 2,
            signed: true,
        },
    ),
    (
        "u32",
        Element::Integer {
            size: 4,
            signed: false,
        },
    ),
    (
        "int",
        Element::Integer {
            size: 4,
            signed: true,
        },
    ),
    (
        "unsigned long",
        Element::Integer {
            size: 8,
            signed: false,
        },
    ),
    (
        "s64",
        Element::Integer {
            size: 8,
            signed: true,
        },
    ),
];

/// One generated field: the declaration as written and the field it must parse to.
#[derive(Debug, Clone)]
struct GenField {
    decl: String,
    field: Field,
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,12}"
}

/// What user_events prints inside array brackets: garbage, nothing, or a real count.
fn brackets() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i32>().prop_map(|n| format!("[{n}]")),
        Just("[]".to_string()),
        "[A-Z_]{1,12}".prop_map(|s| format!("[{s}]")),
    ]
}

fn elem() -> impl Strategy<Value = (&'static str, Element)> {
    prop::sample::select(ELEMENTS)
}

/// (decl, type_text, size, kind) for every kind; `line_signed` is the `signed:` value.
fn typed(line_signed: Option<bool>) -> impl Strategy<Value = (String, String, u32, FieldKind)> {
    let scalar = prop::sample::select(SCALARS).prop_map(move |(ty, size, implied)| {
        let signed = line_signed.or(implied).unwrap_or(false);
        let kind = FieldKind::Integer {
            size: size as u8,
            signed,
        };
        (format!("{ty} {{}}"), ty.to_string(), size, kind)
    });
    let fixed = (elem(), 1u32..64, brackets()).prop_map(|((ty, elem), count, b)| {
        let kind = FieldKind::FixedArray { elem, count };
        (
            format!("{ty} {{}}{b}"),
            format!("{ty}{b}"),
            count * elem.size(),
            kind,
        )
    });
    let rest = (elem(), brackets()).prop_map(|((ty, elem), b)| {
        (
            format!("{ty} {{}}{b}"),
            format!("{ty}{b}"),
            0,
            FieldKind::RestOfRecord { elem },
        )
    });
    let dynamic = (
        elem(),
        any::<bool>(),
        any::<bool>(),
        brackets(),
        any::<bool>(),
    )
        .prop_map(|((ty, elem), rel, brackets_after_name, b, legacy)| {
            let (loc, word) = if rel {
                (LocKind::RelLoc, "__rel_loc")
            } else {
                (LocKind::DataLoc, "__data_loc")
            };
            let (decl, type_text) = if brackets_after_name {
                (format!("{word} {ty} {{}}{b}"), format!("{word} {ty}{b}"))
            } else {
                (format!("{word} {ty}[] {{}}"), format!("{word} {ty}[]"))
            };
            let size = if legacy && !rel { 2 } else { 4 };
            (decl, type_text, size, FieldKind::Dynamic { loc, elem })
        });
    let structure = (ident(), 1u32..5000).prop_map(|(tag, size)| {
        let kind = FieldKind::Struct {
            type_name: tag.clone(),
        };
        (
            format!("struct {tag} {{}}"),
            format!("struct {tag}"),
            size,
            kind,
        )
    });
    let unknown = prop_oneof![
        (3u32..64)
            .prop_filter("not a scalar size", |s| ![4, 8].contains(s))
            .prop_map(|size| (
                "__int128 {}".to_string(),
                "__int128".to_string(),
                size,
                FieldKind::Unknown
            )),
        // Not splittable: unbalanced bracket. The best-effort name is the identifier.
        (1u32..64).prop_map(|size| (
            "int {}[4".to_string(),
            String::new(),
            size,
            FieldKind::Unknown
        )),
    ];
    prop_oneof![scalar, fixed, rest, dynamic, structure, unknown]
}

fn gen_field(name_prefix: &'static str) -> impl Strategy<Value = GenField> {
    (ident(), any::<u32>(), prop::option::of(any::<bool>())).prop_flat_map(
        move |(name, offset, signed)| {
            let name = format!("{name_prefix}{name}");
            typed(signed).prop_map(move |(decl_tpl, type_text, size, kind)| {
                let decl = decl_tpl.replace("{}", &name);
                // An unsplittable declaration keeps its whole text as the type.
                let type_text = if type_text.is_empty() {
                    decl.clone()
                } else {
                    type_text
                };
                let field = Field {
                    name: name.clone(),
                    type_text,
                    offset,
                    size,
                    signed,
                    kind,
                };
                GenField { decl, field }
            })
        },
    )
}

/// How a file is laid out on the page.
#[derive(Debug, Clone)]
struct Style {
    indent: &'static str,
    sep: &'static str,
    eol: &'static str,
    final_newline: bool,
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop::sample::select(&["\t", "", " ", "  "][..]),
        prop::sample::select(&["\t", " ", "", "\t "][..]),
        prop::sample::select(&["\n", "\r\n"][..]),
        any::<bool>(),
    )
        .prop_map(|(indent, sep, eol, final_newline)| Style {
            indent,
            sep,
            eol,
            final_newline,
        })
}

#[derive(Debug, Clone)]
struct GenFile {
    text: String,
    expected: EventFormat,
}

fn event_name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,20}(\\.[0-9a-f]{1,4}){0,2}"
}

fn gen_file() -> impl Strategy<Value = GenFile> {
    (
        event_name(),
        any::<u32>(),
        prop::collection::vec(gen_field("common_"), 1..6),
        prop::collection::vec(gen_field(""), 0..12),
        prop::option::of("[^\\s][^\r\n]{0,80}"),
        style(),
    )
        .prop_map(|(name, id, common, fields, print_fmt, style)| {
            let Style {
                indent,
                sep,
                eol,
                final_newline,
            } = style;
            let line = |g: &GenField| {
                let f = &g.field;
                let signed = f
                    .signed
                    .map_or(String::new(), |s| format!("{sep}signed:{};", u8::from(s)));
                format!(
                    "{indent}field:{};{sep}offset:{};{sep}size:{};{signed}{eol}",
                    g.decl, f.offset, f.size
                )
            };
            let mut text = format!("name: {name}{eol}ID: {id}{eol}format:{eol}");
            common.iter().for_each(|g| text.push_str(&line(g)));
            text.push_str(eol);
            fields.iter().for_each(|g| text.push_str(&line(g)));
            if let Some(p) = &print_fmt {
                text.push_str(&format!("{eol}print fmt: {p}{eol}"));
            }
            if !final_newline {
                text.truncate(text.trim_end_matches(['\r', '\n']).len());
            }
            let expected = EventFormat {
                name,
                id,
                common_fields: common.into_iter().map(|g| g.field).collect(),
                fields: fields.into_iter().map(|g| g.field).collect(),
                print_fmt: print_fmt.unwrap_or_default(),
            };
            GenFile { text, expected }
        })
}

/// Format-file tokens, for text that looks almost right.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(
        &[
            "name:",
            "ID:",
            "format:",
            "field:",
            "field special:",
            "offset:",
            "size:",
            "signed:",
            "print fmt:",
            ";",
            ":",
            "\n",
            "\r\n",
            "\t",
            " ",
            "[",
            "]",
            "[]",
            "__data_loc ",
            "__rel_loc ",
            "char",
            "unsigned",
            "struct",
            "*",
            "x",
            "0",
            "1",
            "4294967295",
            "99999999999",
            "-1",
            "é",
            "\u{0}",
        ][..],
    );
    prop::collection::vec(token, 0..80).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse_format(&text);
    }

    #[test]
    fn token_soup_never_panics(text in token_soup()) {
        let _ = parse_format(&text);
    }

    #[test]
    fn damaged_files_never_panic(
        file in gen_file(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<char>(), any::<bool>()), 1..8),
    ) {
        let mut text: Vec<char> = file.text.chars().collect();
        for (at, c, insert) in edits {
            if text.is_empty() {
                break;
            }
            let i = at.index(text.len());
            if insert { text.insert(i, c) } else { text.remove(i); }
        }
        let _ = parse_format(&text.into_iter().collect::<String>());
    }

    #[test]
    fn generated_files_parse_back_exactly(file in gen_file()) {
        let parsed = parse_format(&file.text);
        prop_assert_eq!(parsed, Ok(file.expected), "text:\n{}", file.text);
    }
}
