//! Pre-registration flags of `record` and `tail` (`--register`, `--register-file`,
//! `--register-eventheader`, `--keep-registered`) and the subcommands `uevrec register`,
//! `uevrec unregister` and `uevrec emit` (docs/register.md).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use uevrec_parsers::{Element, FieldKind};
use uevrec_samples::{Flags, PayloadValue, RegisterCommand, UserEvents, Written};

use super::{EXIT_ERROR, EXIT_OK, values};
use crate::capture::register::{Outcome, RegError, Registered, Registrar, Wanted, eventheader};
use crate::capture::selector::Selector;
use crate::capture::tracefs::Tracefs;
use crate::messages;

/// The pre-registration flags of `record` and `tail`.
#[derive(Debug, Clone, Default, Args)]
pub struct RegisterFlags {
    /// Before attaching, create the persistent user_event 'NAME FIELDS' (e.g. 'myapp_start
    /// u32 pid; __rel_loc char[] msg'), so a producer's first record is kept; deleted at the
    /// end if this run created it (repeatable).
    #[arg(long = "register", value_name = "'NAME FIELDS'")]
    pub register: Vec<String>,
    /// Like --register for every line of FILE (`#` starts a comment line).
    #[arg(long, value_name = "FILE")]
    pub register_file: Vec<PathBuf>,
    /// Pre-register EventHeader tracepoints `PROVIDER_L<level>K<keyword>[G<group>]` (a glob
    /// in the level, e.g. `MyProvider_L*K1`, means levels 1-5; repeatable).
    #[arg(long, value_name = "TRACEPOINT")]
    pub register_eventheader: Vec<String>,
    /// Leave the events this run pre-registered in place at the end.
    #[arg(long)]
    pub keep_registered: bool,
}

impl RegisterFlags {
    /// Whether any event is to be pre-registered.
    pub fn any(&self) -> bool {
        !(self.register.is_empty()
            && self.register_file.is_empty()
            && self.register_eventheader.is_empty())
    }

    /// Every event the flags ask for, in order (flags, files, EventHeader).
    pub fn wanted(&self) -> Result<Vec<Wanted>, RegError> {
        let mut out = Vec::new();
        for text in &self.register {
            out.push(Wanted::parse(text, false)?);
        }
        for file in &self.register_file {
            out.extend(crate::capture::register::read_register_file(file, false)?);
        }
        for pattern in &self.register_eventheader {
            out.extend(eventheader::expand(pattern)?);
        }
        Ok(out)
    }

    /// Add selectors for the pre-registered events when the run has selectors of its own
    /// (without any, the default selectors already take every user_event).
    pub fn add_selectors(&self, selectors: &mut Vec<Selector>) {
        if selectors.is_empty() {
            return;
        }
        if let Ok(wanted) = self.wanted() {
            for w in wanted {
                let s = w.selector();
                if !selectors.iter().any(|x| x.to_string() == s.to_string()) {
                    selectors.push(s);
                }
            }
        }
    }

    /// Create the events (before the recorder attaches); the guard deletes the ones this
    /// run created when dropped or finished.
    pub fn prepare(&self, tracefs: Option<&Path>, quiet: bool) -> Result<Registered, String> {
        if !self.any() {
            return Ok(Registered::none());
        }
        let wanted = self.wanted().map_err(|e| e.to_string())?;
        let tracefs = Tracefs::discover(tracefs).map_err(|e| e.to_string())?;
        let registrar = Registrar::new(tracefs.root()).map_err(|e| e.to_string())?;
        Registered::create_all(registrar, &wanted, self.keep_registered, quiet)
            .map_err(|e| e.to_string())
    }
}

/// Delete what `reg` created; the exit status that calls for (1 when a delete failed).
pub fn finish(reg: &mut Registered) -> i32 {
    let errors = reg.finish();
    for e in &errors {
        messages::error(e);
    }
    if errors.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    }
}

/// `uevrec register`.
#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// The event name.
    pub name: String,
    /// The fields, register-command syntax (`u32 pid; __rel_loc char[] msg`; several words
    /// are joined with spaces).
    #[arg(
        value_name = "FIELDS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub fields: Vec<String>,
    /// Create a multi-format version (`user_events_multi:NAME.<hex>`, Linux 6.10+).
    #[arg(long)]
    pub multi_format: bool,
    /// Where tracefs is mounted (default: found in /proc/self/mounts).
    #[arg(long, env = "UEVREC_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,
}

/// `uevrec unregister`.
#[derive(Debug, Args)]
pub struct UnregisterArgs {
    /// The event name.
    pub name: String,
    /// Its fields; without them, the only event of that name that dynamic_events lists.
    #[arg(
        value_name = "FIELDS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub fields: Vec<String>,
    /// How long to retry while the event is still in use (EBUSY).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = values::parse_duration)]
    pub wait: Duration,
    /// Where tracefs is mounted (default: found in /proc/self/mounts).
    #[arg(long, env = "UEVREC_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,
}

/// `uevrec emit`.
#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The event name (registered by others: its fields are read from tracefs; or new:
    /// give --fields).
    pub name: String,
    /// FIELD=VALUE: integers (decimal, 0x hex), text for char fields, hex for byte arrays
    /// and structs, comma-separated numbers for integer arrays; fields not given are 0 or
    /// empty.
    #[arg(value_name = "FIELD=VALUE")]
    pub values: Vec<String>,
    /// Declare the fields inline (`u32 a; char[8] b`) instead of reading them.
    #[arg(long, value_name = "FIELDS")]
    pub fields: Option<String>,
    /// Register as a multi-format version.
    #[arg(long)]
    pub multi_format: bool,
    /// How long to wait for a recorder (the enable bit): the kernel discards writes to an
    /// event nobody records, so without one emit fails.
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = values::parse_duration)]
    pub wait: Duration,
    /// Where tracefs is mounted (default: found in /proc/self/mounts).
    #[arg(long, env = "UEVREC_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,
}

fn registrar(tracefs: Option<&Path>) -> Result<Registrar, String> {
    let t = Tracefs::discover(tracefs).map_err(|e| e.to_string())?;
    Registrar::new(t.root()).map_err(|e| e.to_string())
}

fn command_text(name: &str, fields: &[String]) -> String {
    let fields = fields.join(" ");
    if fields.trim().is_empty() {
        name.to_string()
    } else {
        format!("{name} {}", fields.trim())
    }
}

/// `uevrec register NAME FIELDS [--multi-format]`.
pub fn register(args: &RegisterArgs) -> i32 {
    let run = || -> Result<(), String> {
        let w = Wanted::parse(&command_text(&args.name, &args.fields), args.multi_format)
            .map_err(|e| e.to_string())?;
        let reg = registrar(args.tracefs.as_deref())?;
        match reg.create(&w).map_err(|e| e.to_string())? {
            Outcome::Created => {
                messages::print(format_args!("uevrec: registered `{}`\n", w.text()))
            }
            Outcome::Existed => messages::print(format_args!(
                "uevrec: `{}` exists already (nothing created)\n",
                w.text()
            )),
        }
        Ok(())
    };
    status(run())
}

/// `uevrec unregister NAME [FIELDS]`.
pub fn unregister(args: &UnregisterArgs) -> i32 {
    let run = || -> Result<(), String> {
        let reg = registrar(args.tracefs.as_deref())?;
        let text = if args.fields.is_empty() {
            let lines = reg.dynamic_events_lines(&args.name);
            match lines.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(format!(
                        "no user_event `{}` in dynamic_events: `uevrec list` shows the events",
                        args.name
                    ));
                }
                _ => {
                    return Err(format!(
                        "`{}` has several formats ({}): give the fields of the one to delete",
                        args.name,
                        reg.listed(&args.name)
                    ));
                }
            }
        } else {
            command_text(&args.name, &args.fields)
        };
        let w = Wanted::parse(&text, false).map_err(|e| e.to_string())?;
        reg.delete(&w, args.wait).map_err(|e| e.to_string())?;
        messages::print(format_args!("uevrec: unregistered `{}`\n", w.text()));
        Ok(())
    };
    status(run())
}

fn status(r: Result<(), String>) -> i32 {
    match r {
        Ok(()) => EXIT_OK,
        Err(e) => {
            messages::error(&e);
            EXIT_ERROR
        }
    }
}

/// `uevrec emit NAME [FIELD=VALUE …]`.
pub fn emit(args: &EmitArgs) -> i32 {
    status(emit_inner(args))
}

fn emit_inner(args: &EmitArgs) -> Result<(), String> {
    let t = Tracefs::discover(args.tracefs.as_deref()).map_err(|e| e.to_string())?;
    let reg = Registrar::new(t.root()).map_err(|e| e.to_string())?;
    let text = match &args.fields {
        Some(f) => command_text(&args.name, std::slice::from_ref(f)),
        None => {
            let lines = reg.dynamic_events_lines(&args.name);
            match lines.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(format!(
                        "no user_event `{}` exists: declare its fields with --fields 'u32 a; \
                         char[8] b' (or start its producer first)",
                        args.name
                    ));
                }
                _ => {
                    return Err(format!(
                        "`{}` has several formats ({}): choose one with --fields",
                        args.name,
                        reg.listed(&args.name)
                    ));
                }
            }
        }
    };
    let cmd =
        RegisterCommand::parse(&text).map_err(|e| format!("the kernel refuses `{text}`: {e}"))?;
    let owned = values_for(&cmd, &args.values)?;
    let payload_values: Vec<PayloadValue<'_>> = owned.iter().map(Owned::as_payload).collect();
    let payload = uevrec_samples::encode(&cmd, &payload_values).map_err(|e| e.to_string())?;
    let events = UserEvents::open_in(t.root()).map_err(|e| e.to_string())?;
    let flags = if args.multi_format {
        Flags::MULTI_FORMAT
    } else {
        Flags::NONE
    };
    let event = events.register(&cmd, flags).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            format!(
                "{e}: `{}` exists with other fields ({}); emit with those (drop --fields) or \
                 use --multi-format",
                cmd.name,
                reg.listed(&cmd.name)
            )
        } else {
            e.to_string()
        }
    })?;
    if !event.wait_enabled(args.wait) {
        return Err(format!(
            "nobody records `{}` (its enable bit stayed clear for {}): the kernel discards \
             writes to an event nobody records, so nothing was written. Start a recorder first \
             (`uevrec tail user_events:{}`), or give it more time with --wait",
            cmd.name,
            humantime::format_duration(args.wait),
            cmd.name
        ));
    }
    match event.write(&payload).map_err(|e| e.to_string())? {
        Written::Yes => Ok(()),
        Written::Disabled => Err(format!(
            "the recorder of `{}` went away before the write (EBADF): nothing was written",
            cmd.name
        )),
    }
}

/// A field value parsed from the command line.
#[derive(Debug, Clone, PartialEq)]
enum Owned {
    Int(i64),
    Uint(u64),
    Str(String),
    Bytes(Vec<u8>),
    U16s(Vec<u16>),
    I16s(Vec<i16>),
    U32s(Vec<u32>),
    I32s(Vec<i32>),
    U64s(Vec<u64>),
    I64s(Vec<i64>),
}

impl Owned {
    fn as_payload(&self) -> PayloadValue<'_> {
        match self {
            Owned::Int(v) => PayloadValue::Int(*v),
            Owned::Uint(v) => PayloadValue::Uint(*v),
            Owned::Str(s) => PayloadValue::Str(s),
            Owned::Bytes(b) => PayloadValue::Bytes(b),
            Owned::U16s(v) => PayloadValue::U16s(v),
            Owned::I16s(v) => PayloadValue::I16s(v),
            Owned::U32s(v) => PayloadValue::U32s(v),
            Owned::I32s(v) => PayloadValue::I32s(v),
            Owned::U64s(v) => PayloadValue::U64s(v),
            Owned::I64s(v) => PayloadValue::I64s(v),
        }
    }
}

/// The value of every field of `cmd` from `FIELD=VALUE` arguments (missing: zero/empty).
fn values_for(cmd: &RegisterCommand, args: &[String]) -> Result<Vec<Owned>, String> {
    let mut given: Vec<(&str, &str)> = Vec::new();
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("`{a}`: write FIELD=VALUE"))?;
        if cmd.field(k).is_none() {
            let names: Vec<&str> = cmd.fields.iter().map(|f| f.name.as_str()).collect();
            return Err(format!(
                "`{}` has no field `{k}`; its fields: {}",
                cmd.name,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        }
        if given.iter().any(|(g, _)| *g == k) {
            return Err(format!("field `{k}` given twice"));
        }
        given.push((k, v));
    }
    cmd.fields
        .iter()
        .map(|f| {
            let v = given.iter().find(|(k, _)| *k == f.name).map(|(_, v)| *v);
            parse_value(&f.kind, f.size, v)
                .map_err(|e| format!("field `{}` ({}): {e}", f.name, f.type_text))
        })
        .collect()
}

fn parse_value(kind: &FieldKind, size: u32, text: Option<&str>) -> Result<Owned, String> {
    Ok(match kind {
        FieldKind::Integer { signed: true, .. } => Owned::Int(text.map_or(Ok(0), parse_i64)?),
        FieldKind::Integer { signed: false, .. } => Owned::Uint(text.map_or(Ok(0), parse_u64)?),
        FieldKind::FixedArray {
            elem: Element::Char,
            ..
        }
        | FieldKind::Dynamic {
            elem: Element::Char,
            ..
        } => Owned::Str(text.unwrap_or("").to_string()),
        FieldKind::Struct { .. } => match text {
            Some(t) => Owned::Bytes(parse_hex(t)?),
            None => Owned::Bytes(vec![0; size as usize]),
        },
        FieldKind::Dynamic {
            elem: Element::Integer { size, signed },
            ..
        } => {
            let items: Vec<&str> = text
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            macro_rules! list {
                ($variant:ident, $parse:expr, $t:ty) => {
                    Owned::$variant(
                        items
                            .iter()
                            .map(|s| {
                                let v = $parse(s)?;
                                <$t>::try_from(v)
                                    .map_err(|_| format!("{s} does not fit a {}", stringify!($t)))
                            })
                            .collect::<Result<Vec<$t>, String>>()?,
                    )
                };
            }
            match (size, signed) {
                (1, true) => {
                    let v = items
                        .iter()
                        .map(|s| {
                            let v = parse_i64(s)?;
                            i8::try_from(v)
                                .map(|b| b as u8)
                                .map_err(|_| format!("{s} does not fit an s8"))
                        })
                        .collect::<Result<Vec<u8>, String>>()?;
                    Owned::Bytes(v)
                }
                (2, false) => list!(U16s, parse_u64, u16),
                (2, true) => list!(I16s, parse_i64, i16),
                (4, false) => list!(U32s, parse_u64, u32),
                (4, true) => list!(I32s, parse_i64, i32),
                (8, false) => list!(U64s, parse_u64, u64),
                _ => list!(I64s, parse_i64, i64),
            }
        }
        // Byte arrays and dynamic byte fields, and anything else: hex.
        _ => Owned::Bytes(text.map_or(Ok(Vec::new()), parse_hex)?),
    })
}

fn parse_i64(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let mag = parse_u64(digits)?;
    if neg {
        0i64.checked_sub_unsigned(mag)
            .ok_or_else(|| format!("{s} is below the smallest s64"))
    } else {
        i64::try_from(mag).map_err(|_| format!("{s} is above the largest s64"))
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse::<u64>(),
    };
    r.map_err(|_| format!("`{s}` is not an unsigned integer (decimal or 0x hex)"))
}

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim().strip_prefix("0x").unwrap_or(s.trim());
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "`{s}` is not hex bytes (two hex digits per byte, e.g. 00ff10)"
        ));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(t: &str) -> RegisterCommand {
        RegisterCommand::parse(t).unwrap()
    }

    #[test]
    fn values_follow_the_field_types() {
        let c = cmd(
            "e s8 a; u64 b; char[4] c; unsigned char[2] d; __data_loc u32[] e; __rel_loc s16[] f; struct x g 2; __data_loc s8[] h",
        );
        let args: Vec<String> = [
            "a=-128",
            "b=0xffffffffffffffff",
            "c=hi",
            "d=0aff",
            "e=1,4294967295",
            "f=-1,2",
            "g=0102",
            "h=-1,1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = values_for(&c, &args).unwrap();
        assert_eq!(
            v,
            vec![
                Owned::Int(-128),
                Owned::Uint(u64::MAX),
                Owned::Str("hi".into()),
                Owned::Bytes(vec![0x0a, 0xff]),
                Owned::U32s(vec![1, u32::MAX]),
                Owned::I16s(vec![-1, 2]),
                Owned::Bytes(vec![1, 2]),
                Owned::Bytes(vec![0xff, 1]),
            ]
        );
        // Missing fields are zero / empty; the payload encodes.
        let v = values_for(&c, &[]).unwrap();
        let p: Vec<PayloadValue<'_>> = v.iter().map(Owned::as_payload).collect();
        assert!(uevrec_samples::encode(&c, &p).is_ok());
    }

    #[test]
    fn bad_values_name_the_field_and_the_fix() {
        let c = cmd("e u8 a; __data_loc u16[] b; unsigned char[2] d");
        let err = |a: &str| values_for(&c, &[a.to_string()]).unwrap_err();
        assert!(err("zz=1").contains("no field `zz`; its fields: a, b, d"));
        assert!(err("a").contains("FIELD=VALUE"));
        assert!(err("b=1,70000").contains("does not fit a u16"));
        assert!(err("d=xyz").contains("hex bytes"));
        assert!(err("a=-1").contains("not an unsigned integer"));
        // Range checks happen when encoding: a u8 of 300.
        let v = values_for(&c, &["a=300".to_string()]).unwrap();
        let p: Vec<PayloadValue<'_>> = v.iter().map(Owned::as_payload).collect();
        assert!(uevrec_samples::encode(&c, &p).is_err());
    }
}
