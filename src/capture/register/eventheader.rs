//! `--register-eventheader 'Provider_L5K1'`: the fixed register command of EventHeader
//! tracepoints (`<Provider>_L<level>K<keyword>[G<group>]`, the eventheader crates,
//! TraceLogging for Linux and OpenTelemetry's user_events exporters; docs/eventheader.md),
//! with shell globs over the level (`Provider_L*K1`: levels 1 to 5).

use uevrec_samples::RegisterCommand;

use super::{RegError, Wanted};

/// The fields every EventHeader tracepoint is registered with (eventheader 0.4+ spacing).
pub const FIELDS: &str = "u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level";

/// The levels a glob in the level part expands over (1 critical … 5 verbose).
pub const LEVELS: std::ops::RangeInclusive<u8> = 1..=5;

/// The EventHeader tracepoints `pattern` names, each with [`FIELDS`].
pub fn expand(pattern: &str) -> Result<Vec<Wanted>, RegError> {
    let usage = |why: &str| {
        RegError::Usage(format!(
            "--register-eventheader `{pattern}`: {why}; write PROVIDER_L<level>K<keyword hex>[G<group>], \
             e.g. MyProvider_L5K1 or MyProvider_L*K1 (levels 1-5)"
        ))
    };
    let (provider, rest) = pattern
        .rsplit_once("_L")
        .ok_or_else(|| usage("no `_L<level>` after the provider"))?;
    if provider.is_empty() {
        return Err(usage("empty provider name"));
    }
    let (level, rest) = rest
        .split_once('K')
        .ok_or_else(|| usage("no `K<keyword>` after the level"))?;
    let (keyword, group) = match rest.split_once('G') {
        Some((k, g)) => (k, Some(g)),
        None => (rest, None),
    };
    let keyword = keyword.strip_prefix("0x").unwrap_or(keyword);
    if keyword.is_empty() || keyword.len() > 16 || !keyword.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(usage(&format!(
            "keyword `{keyword}` is not a 64-bit hex number (globs are accepted only in the level)"
        )));
    }
    let keyword = u64::from_str_radix(keyword, 16).map_err(|_| usage("bad keyword"))?;
    if let Some(g) = group
        && (g.is_empty()
            || !g
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    {
        return Err(usage(&format!(
            "group `{g}` must be lowercase letters and digits"
        )));
    }
    let levels: Vec<u8> = if level.contains(['*', '?', '[']) {
        let glob = glob::Pattern::new(level).map_err(|e| usage(&format!("level glob: {e}")))?;
        LEVELS.filter(|l| glob.matches(&format!("{l:x}"))).collect()
    } else {
        let l = u8::from_str_radix(level, 16)
            .map_err(|_| usage(&format!("level `{level}` is not a number (hex) or glob")))?;
        vec![l]
    };
    if levels.is_empty() {
        return Err(usage(&format!("level glob `{level}` matches none of 1-5")));
    }
    levels
        .into_iter()
        .map(|l| {
            let group = group.map_or(String::new(), |g| format!("G{g}"));
            let text = format!("{provider}_L{l:x}K{keyword:x}{group} {FIELDS}");
            let cmd = RegisterCommand::parse(&text).map_err(|e| RegError::Refused {
                command: text.clone(),
                why: e.to_string(),
            })?;
            Ok(Wanted {
                cmd,
                multi_format: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str) -> Vec<String> {
        expand(p).unwrap().into_iter().map(|w| w.cmd.name).collect()
    }

    #[test]
    fn names_and_level_globs() {
        assert_eq!(names("Prov_L5K1"), ["Prov_L5K1"]);
        assert_eq!(
            names("My_Prov_L*K1"),
            [
                "My_Prov_L1K1",
                "My_Prov_L2K1",
                "My_Prov_L3K1",
                "My_Prov_L4K1",
                "My_Prov_L5K1"
            ]
        );
        assert_eq!(
            names("P_L[2-3]K0xF0Ggrp1"),
            ["P_L2Kf0Ggrp1", "P_L3Kf0Ggrp1"]
        );
        let w = &expand("P_L4K1").unwrap()[0];
        assert_eq!(w.text(), format!("P_L4K1 {FIELDS}"));
    }

    #[test]
    fn bad_patterns_say_the_form() {
        for bad in [
            "Prov",
            "_L5K1",
            "P_L5",
            "P_L5Kzz",
            "P_L*K*",
            "P_L5K1GUP",
            "P_L[7-9]K1",
        ] {
            let e = expand(bad).unwrap_err().to_string();
            assert!(e.contains("PROVIDER_L<level>K"), "{bad}: {e}");
        }
    }
}
