//! `MOAT_*` environment overrides, applied to the TOML document before it is deserialized so
//! the same unknown-key and type checks cover them.
//!
//! `MOAT_<SECTION>_<KEY>` sets `<section>.<key>` (e.g. `MOAT_SANDBOX_IMAGE`,
//! `MOAT_EXEC_YIELD_MS`). Values are read as TOML (`true`, `42`, `["a","b"]`) and fall back to a
//! plain string. Two names from the contract have their own spelling: `MOAT_MAX_OUTPUT_CHARS`
//! and `MOAT_PROCESS_TTL` (seconds).

use toml::{Table, Value};

use super::ConfigError;

/// Sections that take overrides; other `MOAT_*` variables (`MOAT_HOME`, `MOAT_SESSION`, …)
/// belong to the CLI and are ignored here.
const SECTIONS: &[&str] = &[
    "sandbox",
    "exec",
    "process",
    "serve",
    "elevated",
    "approvals",
    "e2b",
    "pool",
];

const ALIASES: &[(&str, &str, &str)] = &[
    ("MOAT_MAX_OUTPUT_CHARS", "exec", "max_output_chars"),
    ("MOAT_PROCESS_TTL", "process", "ttl_secs"),
];

pub fn apply(doc: &mut Table, vars: &[(String, String)]) -> Result<(), ConfigError> {
    let mut sorted: Vec<&(String, String)> = vars.iter().collect();
    sorted.sort();
    for (name, raw) in sorted {
        let Some((section, key)) = target(name) else {
            continue;
        };
        let table = doc
            .entry(section.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        let Value::Table(table) = table else {
            return Err(ConfigError::Env {
                var: name.clone(),
                message: format!("`{section}` in the config file is not a table"),
            });
        };
        table.insert(key, parse_value(raw));
    }
    Ok(())
}

fn target(name: &str) -> Option<(String, String)> {
    if let Some((_, section, key)) = ALIASES.iter().find(|(var, _, _)| *var == name) {
        return Some((section.to_string(), key.to_string()));
    }
    let rest = name.strip_prefix("MOAT_")?.to_ascii_lowercase();
    SECTIONS.iter().find_map(|section| {
        let key = rest.strip_prefix(section)?.strip_prefix('_')?;
        (!key.is_empty()).then(|| (section.to_string(), key.to_string()))
    })
}

fn parse_value(raw: &str) -> Value {
    format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(vars: &[(&str, &str)]) -> Table {
        let mut doc = Table::new();
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        apply(&mut doc, &vars).unwrap();
        doc
    }

    #[test]
    fn overrides_map_to_keys() {
        let doc = run(&[
            ("MOAT_SANDBOX_IMAGE", "alpine:3"),
            ("MOAT_EXEC_YIELD_MS", "250"),
            ("MOAT_SANDBOX_READ_ONLY_ROOT", "false"),
            ("MOAT_SANDBOX_PATH_PREPEND", r#"["/opt/a","/opt/b"]"#),
            ("MOAT_MAX_OUTPUT_CHARS", "5000"),
            ("MOAT_PROCESS_TTL", "120"),
            ("MOAT_HOME", "/tmp/x"),
            ("MOAT_SESSION", "s1"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(doc["sandbox"]["image"].as_str(), Some("alpine:3"));
        assert_eq!(doc["exec"]["yield_ms"].as_integer(), Some(250));
        assert_eq!(doc["sandbox"]["read_only_root"].as_bool(), Some(false));
        assert_eq!(doc["sandbox"]["path_prepend"].as_array().unwrap().len(), 2);
        assert_eq!(doc["exec"]["max_output_chars"].as_integer(), Some(5000));
        assert_eq!(doc["process"]["ttl_secs"].as_integer(), Some(120));
        assert_eq!(doc.len(), 3, "MOAT_HOME/MOAT_SESSION/PATH are not config");
    }

    #[test]
    fn unknown_override_becomes_unknown_key() {
        let doc = run(&[("MOAT_SANDBOX_IMAGEZ", "x")]);
        assert!(doc["sandbox"].get("imagez").is_some());
    }
}
