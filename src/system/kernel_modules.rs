//! The loaded kernel modules and where their code lies, from `/proc/modules` (`name
//! size refcount deps state address [taints]` a line): what `perf record` maps for each
//! (`machine__create_modules`), so that frames in module code are named, not `[unknown]`.

/// Where the loaded modules are listed.
pub const PATH: &str = "/proc/modules";

/// Why the modules have no maps: `/proc/modules` shows zero addresses.
pub const ADDRESSES_HIDDEN: &str = "/proc/modules shows zero addresses (kptr_restrict): \
    the perf.data holds no maps of the loaded kernel modules, so perf script prints the \
    frames in their code as [unknown] (record as root, or with kernel.kptr_restrict=0)";

/// One loaded module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModule {
    /// Its name (`nf_tables`).
    pub name: String,
    /// The address of its core (code and data).
    pub start: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// The loaded modules now: none on a kernel without module support (no
/// `/proc/modules`), or why their addresses cannot be told (in words).
pub fn loaded() -> Result<Vec<LoadedModule>, String> {
    match std::fs::read_to_string(PATH) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!(
            "{PATH} could not be read ({e}): the perf.data holds no maps of the loaded \
             kernel modules, so perf script prints the frames in their code as [unknown]"
        )),
    }
}

/// The modules of a `/proc/modules` text (lines it cannot read are passed over), or
/// [`ADDRESSES_HIDDEN`] when it lists modules at address 0 only.
pub fn parse(text: &str) -> Result<Vec<LoadedModule>, String> {
    let mut modules = Vec::new();
    let mut hidden = false;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(size), Some(address)) =
            (fields.first(), fields.get(1), fields.get(5))
        else {
            continue;
        };
        let (Ok(size), Some(Ok(start))) = (
            size.parse::<u64>(),
            (address.strip_prefix("0x")).map(|a| u64::from_str_radix(a, 16)),
        ) else {
            continue;
        };
        if start == 0 {
            hidden = true;
            continue;
        }
        modules.push(LoadedModule {
            name: name.to_string(),
            start,
            size,
        });
    }
    if modules.is_empty() && hidden {
        return Err(ADDRESSES_HIDDEN.to_string());
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_module_with_its_address_and_size() {
        let text = "nf_tables 364544 0 - Live 0xffffffffc0c1c000\n\
                    xfs 2093056 1 - Live 0xffffffffc0a00000 (E)\n\
                    bad line\n\
                    loop 40960 0 - Loading 0xffffffffc0900000 (OE)\n";
        assert_eq!(
            parse(text).unwrap(),
            [
                LoadedModule {
                    name: "nf_tables".into(),
                    start: 0xffff_ffff_c0c1_c000,
                    size: 364_544
                },
                LoadedModule {
                    name: "xfs".into(),
                    start: 0xffff_ffff_c0a0_0000,
                    size: 2_093_056
                },
                LoadedModule {
                    name: "loop".into(),
                    start: 0xffff_ffff_c090_0000,
                    size: 40_960
                },
            ]
        );
        assert_eq!(parse("").unwrap(), []);
    }

    #[test]
    fn zero_addresses_are_hidden_ones() {
        let text = "nf_tables 364544 0 - Live 0x0000000000000000\n\
                    xfs 2093056 1 - Live 0x0000000000000000 (E)\n";
        assert_eq!(parse(text).unwrap_err(), ADDRESSES_HIDDEN);
    }
}
