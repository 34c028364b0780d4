//! One `--where` condition: CEL text compiled once into a [`cel::Program`], with what it
//! names (the record's variables, and which `fields.NAME` it reads), so that a format's
//! filter knows at start which fields to decode and which names no format has.

use std::collections::BTreeSet;
use std::fmt;

use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// The record's variables a condition may name (docs/filtering.md, "Variables").
pub const VARIABLES: &[&str] = &[
    "system", "event", "cpu", "pid", "tid", "fields", "provider", "name", "level", "keyword",
    "opcode",
];

/// The record's context a condition may name: who wrote it, as its JSON line shows.
pub const CONTEXT_VARIABLES: &[&str] = &[
    "comm",
    "cgroup",
    "container",
    "unit",
    "k8s_pod_uid",
    "k8s_qos",
    "k8s_namespace",
    "k8s_pod",
    "k8s_container",
];

/// A condition compiled once: its text, its program and what it reads.
#[derive(Debug)]
pub struct Condition {
    text: String,
    program: Program,
    /// The `fields.NAME` / `fields["NAME"]` names read, each with where it is written
    /// (character offsets into the text).
    fields: Vec<(String, (usize, usize))>,
    /// `fields` used otherwise than by a constant name (`size(fields)`, `fields[x]`):
    /// every field is then offered.
    all_fields: bool,
}

/// A `--where` text that cannot be used: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhereError {
    /// The expression as given.
    pub text: String,
    /// What is wrong, in words.
    pub message: String,
    /// The characters at fault (start, end: offsets in characters into `text`).
    pub at: (usize, usize),
}

impl fmt::Display for WhereError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (start, end) = self.at;
        let width = end.saturating_sub(start).max(1);
        // The text on one line (a newline in it would move the caret off its place).
        let shown: String = self
            .text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        write!(
            f,
            "{}\n  {shown}\n  {}{}",
            self.message,
            " ".repeat(start),
            "^".repeat(width)
        )
    }
}

impl std::error::Error for WhereError {}

impl Condition {
    /// Compile `text` (CEL): a syntax error or a variable no record has is an error
    /// with its place.
    pub fn parse(text: &str) -> Result<Condition, WhereError> {
        let error = |message: String, at: (usize, usize)| WhereError {
            text: text.to_string(),
            message,
            at,
        };
        if text.trim().is_empty() {
            return Err(error(
                "--where needs a condition, e.g. `pid == 42`".into(),
                (0, 1),
            ));
        }
        // The parser's guards are its own; a panic in it must not end the recording.
        let parsed = std::panic::catch_unwind(|| Program::compile(text));
        let program = match parsed {
            Ok(Ok(p)) => p,
            Ok(Err(errors)) => {
                let first = errors.errors.first();
                let message =
                    first.map_or_else(|| "not a CEL expression".to_string(), |e| e.msg.clone());
                let at = match first {
                    // The parser places the end of the text one column short.
                    Some(e) if e.msg.contains("<EOF>") => text.chars().count(),
                    Some(e) => char_at(text, e.pos.0, e.pos.1),
                    None => 0,
                };
                return Err(error(
                    format!("--where is not a CEL condition: {message}"),
                    (at, at + 1),
                ));
            }
            Err(_) => return Err(error("--where is not a CEL condition".into(), (0, 1))),
        };
        let mut found = Found::default();
        walk(program.expression(), &program, &mut found, &BTreeSet::new());
        if let Some((name, at)) = found.unknown.first() {
            return Err(error(
                format!(
                    "--where names `{name}`, which no record has (the variables: {}, {})",
                    VARIABLES.join(", "),
                    CONTEXT_VARIABLES.join(", ")
                ),
                *at,
            ));
        }
        Ok(Condition {
            text: text.to_string(),
            program,
            fields: found.fields,
            all_fields: found.all_fields,
        })
    }

    /// The text as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The compiled program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The field names read by a constant name, with their places in the text.
    pub fn fields(&self) -> &[(String, (usize, usize))] {
        &self.fields
    }

    /// Whether `fields` is used other than by constant names (every field offered).
    pub fn all_fields(&self) -> bool {
        self.all_fields
    }

    /// The conjuncts of this condition (the operands of its top-level `&&`s) that
    /// compare a field with a constant: (field, operator, constant), the operator as the
    /// kernel writes it with the field on its left.
    pub fn field_comparisons(&self) -> Vec<(String, &'static str, Literal)> {
        let mut out = Vec::new();
        let field = |e: &IdedExpr| match &e.expr {
            Expr::Select(s)
                if !s.test && matches!(&s.operand.expr, Expr::Ident(r) if r == "fields") =>
            {
                Some(s.field.clone())
            }
            _ => None,
        };
        conjuncts(self.program.expression(), &field, &mut out);
        out
    }

    /// The conjuncts that compare an EventHeader header variable (`level`, `opcode`: the
    /// fields of the same names in an EventHeader event's format) with a constant, as
    /// [`Condition::field_comparisons`] gives them.
    pub fn header_comparisons(&self) -> Vec<(String, &'static str, Literal)> {
        let mut out = Vec::new();
        let variable = |e: &IdedExpr| match &e.expr {
            Expr::Ident(name) if name == "level" || name == "opcode" => Some(name.clone()),
            _ => None,
        };
        conjuncts(self.program.expression(), &variable, &mut out);
        out
    }

    /// The error for field `name` (read at `at`) that no matching format has.
    pub fn unknown_field(&self, name: &str, at: (usize, usize), formats: &str) -> WhereError {
        WhereError {
            text: self.text.clone(),
            message: format!(
                "--where reads fields.{name}, which no matching event has ({formats})"
            ),
            at,
        }
    }
}

/// A constant a condition compares a field with ([`Condition::field_comparisons`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// An `int` constant.
    Int(i64),
    /// A `string` constant.
    Str(String),
}

/// Collect the comparisons of an operand `named` names with a constant among the `&&`
/// operands of `expr`.
fn conjuncts(
    expr: &IdedExpr,
    named: &dyn Fn(&IdedExpr) -> Option<String>,
    out: &mut Vec<(String, &'static str, Literal)>,
) {
    let Expr::Call(call) = &expr.expr else {
        return;
    };
    if call.func_name == "_&&_" {
        for a in &call.args {
            conjuncts(a, named, out);
        }
        return;
    }
    // (operator, the same with the operands swapped)
    let op = match call.func_name.as_str() {
        "_==_" => ("==", "=="),
        "_!=_" => ("!=", "!="),
        "_<_" => ("<", ">"),
        "_<=_" => ("<=", ">="),
        "_>_" => (">", "<"),
        "_>=_" => (">=", "<="),
        _ => return,
    };
    let literal = |e: &IdedExpr| match &e.expr {
        Expr::Literal(LiteralValue::Int(i)) => Some(Literal::Int(i64::from(*i))),
        Expr::Literal(LiteralValue::String(s)) => Some(Literal::Str(s.to_string())),
        _ => None,
    };
    if let [a, b] = call.args.as_slice() {
        if let (Some(f), Some(l)) = (named(a), literal(b)) {
            out.push((f, op.0, l));
        } else if let (Some(l), Some(f)) = (literal(a), named(b)) {
            out.push((f, op.1, l));
        }
    }
}

/// What a walk of the expression found.
#[derive(Default)]
struct Found {
    fields: Vec<(String, (usize, usize))>,
    all_fields: bool,
    /// Identifiers that are neither variables nor bound by a macro.
    unknown: Vec<(String, (usize, usize))>,
}

/// The character offset of the parser's (1-based line, 1-based column) in `text`.
fn char_at(text: &str, line: isize, column: isize) -> usize {
    let line = usize::try_from(line.max(1) - 1).unwrap_or(0);
    let column = usize::try_from(column.max(1) - 1).unwrap_or(0);
    let before: usize = text
        .split('\n')
        .take(line)
        .map(|l| l.chars().count() + 1)
        .sum();
    (before + column).min(text.chars().count())
}

/// The place of `expr` in the text (characters), from the program's source info (whose
/// offsets are bytes).
fn place(program: &Program, expr: &IdedExpr) -> (usize, usize) {
    let info = program.source_info();
    let chars = |byte: u32| {
        let text = &info.source;
        let end = (byte as usize).min(text.len());
        text.char_indices().take_while(|&(i, _)| i < end).count()
    };
    info.offset_for(expr.id)
        // `stop` is the last character's offset.
        .map_or((0, 1), |(start, stop)| {
            (chars(start), chars(stop.max(start)) + 1)
        })
}

/// Collect the variables and `fields.NAME` of `expr`; `bound` are the names a
/// comprehension (`all`, `exists`, `map`, `filter`) binds around it.
fn walk(expr: &IdedExpr, program: &Program, found: &mut Found, bound: &BTreeSet<String>) {
    match &expr.expr {
        Expr::Ident(name) => {
            if name == "fields" {
                found.all_fields = true;
            } else if !VARIABLES.contains(&name.as_str())
                && !CONTEXT_VARIABLES.contains(&name.as_str())
                && !bound.contains(name)
            {
                found.unknown.push((name.clone(), place(program, expr)));
            }
        }
        Expr::Select(select) => match &select.operand.expr {
            Expr::Ident(root) if root == "fields" && !bound.contains(root) => {
                // From `fields` to the end of the name (the select's own place is its dot).
                let start = place(program, &select.operand).0;
                let end = place(program, expr).0 + 1 + select.field.chars().count();
                found.fields.push((select.field.clone(), (start, end)));
            }
            _ => walk(&select.operand, program, found, bound),
        },
        Expr::Call(call) => {
            // `fields["NAME"]`: the index operator with a constant string.
            if call.func_name == "_[_]"
                && let [target, key] = call.args.as_slice()
                && matches!(&target.expr, Expr::Ident(r) if r == "fields")
                && let Expr::Literal(LiteralValue::String(name)) = &key.expr
            {
                found.fields.push((name.to_string(), place(program, expr)));
                return;
            }
            if let Some(t) = &call.target {
                walk(t, program, found, bound);
            }
            for a in &call.args {
                walk(a, program, found, bound);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, program, found, bound);
            let mut inner = bound.clone();
            inner.insert(c.iter_var.clone());
            if let Some(v) = &c.iter_var2 {
                inner.insert(v.clone());
            }
            inner.insert(c.accu_var.clone());
            for e in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(e, program, found, &inner);
            }
        }
        Expr::List(list) => {
            for e in &list.elements {
                walk(e, program, found, bound);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(e) = &entry.expr {
                    walk(&e.key, program, found, bound);
                    walk(&e.value, program, found, bound);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, program, found, bound);
                }
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_fields_it_reads() {
        let c = Condition::parse("fields.args[1] % 3 == 0 && fields[\"id\"] == 110").unwrap();
        let names: Vec<_> = c.fields().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["args", "id"]);
        assert!(!c.all_fields());
        assert!(Condition::parse("size(fields) > 2").unwrap().all_fields());
    }

    #[test]
    fn top_level_comparisons_of_fields_and_of_the_header_are_found_apart() {
        let c = Condition::parse(
            "level <= 3 && 2 < opcode && fields.level == 1 && (level == 5 || true) && !(opcode == 1)",
        )
        .unwrap();
        assert_eq!(
            c.header_comparisons(),
            [
                ("level".to_string(), "<=", Literal::Int(3)),
                ("opcode".to_string(), ">", Literal::Int(2)),
            ]
        );
        assert_eq!(
            c.field_comparisons(),
            [("level".to_string(), "==", Literal::Int(1))]
        );
    }

    #[test]
    fn a_syntax_error_shows_the_text_and_a_caret() {
        let e = Condition::parse("pid == == 3").unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.starts_with("--where is not a CEL condition"),
            "{shown}"
        );
        let lines: Vec<_> = shown.lines().collect();
        assert_eq!(lines[1], "  pid == == 3");
        assert_eq!(lines[2].trim_end(), "         ^", "{shown}");
    }

    #[test]
    fn an_unknown_variable_is_refused_where_it_is_written() {
        let e = Condition::parse("pid == 3 && colour == 'red'").unwrap_err();
        assert!(e.message.contains("`colour`"), "{e}");
        assert_eq!(e.at.0, 12, "{e}");
        assert_eq!(
            e.to_string().lines().nth(2).unwrap(),
            "              ^^^^^^"
        );
        // The parser's places are bytes; the caret counts characters.
        let e = Condition::parse("\"®য়\"<A").unwrap_err();
        assert_eq!(e.at, (6, 7), "{e}");
    }

    #[test]
    fn macro_variables_are_not_unknown() {
        Condition::parse("[1, 2].exists(x, x == pid)").unwrap();
        Condition::parse("fields.args.all(a, a >= 0)").unwrap();
    }

    #[test]
    fn empty_text_is_refused() {
        assert!(Condition::parse("  ").is_err());
    }
}
