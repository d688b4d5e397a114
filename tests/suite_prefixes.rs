//! The Docker tests share one engine and run in parallel. Each names its sessions (and so its
//! containers and networks) after a prefix, and removes what it made by the name filter
//! `moat-PREFIX-`, which the engine matches as a substring. Two tests with one prefix, or one
//! whose prefix followed by `-` starts another's, remove each other's containers mid-run. This
//! test reads the suite's sources and refuses both, so the clash fails here, every run, and
//! not now and then under load.

use std::collections::BTreeMap;
use std::path::Path;

/// Calls whose first argument is a test's prefix.
const TAKES_PREFIX: &[&str] = &[
    "moat(",
    "moat_as_configured(",
    "TestHome::new(",
    "TestHome::configured(",
    "serve(",
    "Upstreams::start(",
    "attack(",
    "control(",
    "busybox_moat(",
    "const PREFIX: &str = ",
];

/// Where a literal was found: file and enclosing function.
type Site = (String, String);

/// The string literal that starts `text`, if it is a plain one.
fn literal(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('"')?;
    let end = rest.find('"')?;
    let lit = &rest[..end];
    let plain = !lit.is_empty()
        && lit
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    plain.then_some(lit)
}

/// The name of the top-level function whose body holds byte `at` of `src`: the last `fn` that
/// starts a line before it (a function nested in a test, such as a guard's `drop`, is indented).
fn enclosing_fn(src: &str, at: usize) -> String {
    let before = &src[..at];
    before
        .rmatch_indices("fn ")
        .find(|(i, _)| {
            let line_start = before[..*i].rfind('\n').map_or(0, |n| n + 1);
            let head = &before[line_start..*i];
            head.is_empty() || head == "async " || head == "pub " || head == "pub async "
        })
        .map(|(i, _)| {
            before[i + 3..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// Every prefix literal of the suite, with where it is used. A literal starting `t-` counts
/// wherever it stands as a call's or a tuple's first argument: that is the suite's convention
/// for prefixes handed through a helper.
fn prefixes(dir: &Path) -> BTreeMap<String, Vec<Site>> {
    let mut found: BTreeMap<String, Vec<Site>> = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let mut record = |lit: &str, at: usize| {
            let site = (file.clone(), enclosing_fn(&src, at));
            let sites = found.entry(lit.replace('_', "-")).or_default();
            if !sites.contains(&site) {
                sites.push(site);
            }
        };
        for call in TAKES_PREFIX {
            for (at, _) in src.match_indices(call) {
                // `moat(` inside `busybox_moat(` is the helper, not the call.
                let glued = src[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
                if glued && !call.contains("::") {
                    continue;
                }
                if let Some(lit) = literal(&src[at + call.len()..]) {
                    record(lit, at);
                }
            }
        }
        for opener in ["(\"t-", "[\"t-"] {
            for (at, _) in src.match_indices(opener) {
                if let Some(lit) = literal(&src[at + 1..]) {
                    record(lit, at);
                }
            }
        }
    }
    found
}

#[test]
fn no_two_tests_share_a_prefix_or_start_one_anothers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let found = prefixes(&dir);
    assert!(
        found.len() > 100,
        "the scan found only {} prefixes: has the suite's convention changed?",
        found.len()
    );
    let mut clashes = vec![];
    for (lit, sites) in &found {
        if sites.len() > 1 {
            clashes.push(format!("{lit:?} is used by {sites:?}"));
        }
        for (other, other_sites) in found.range(format!("{lit}-")..) {
            if !other.starts_with(&format!("{lit}-")) {
                break;
            }
            // One test may run its prefixes one after another; only another test's clash.
            if other_sites.iter().any(|s| !sites.contains(s)) {
                clashes.push(format!(
                    "{lit:?} ({sites:?}) starts {other:?} ({other_sites:?})"
                ));
            }
        }
    }
    assert!(clashes.is_empty(), "{}", clashes.join("\n"));
}

#[test]
fn the_scan_sees_a_clash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "#[test]\nfn one() { let m = common::moat(\"x-a\", c); }\n\
         #[test]\nasync fn two() { TestHome::new(\"x-a\"); attack(\"t-q\", 1); }\n",
    )
    .unwrap();
    let found = prefixes(dir.path());
    assert_eq!(found["x-a"].len(), 2, "{found:?}");
    assert_eq!(found["t-q"], vec![("a.rs".into(), "two".into())]);
}
