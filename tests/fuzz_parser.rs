//! A fuzz target over the parsing bounds, the parser and the policy engine (docs/security.md,
//! "Command parsing bounds"): grammar-aware shell-like inputs (nesting, quotes, substitutions,
//! here-documents, operators, comments, extended globs, random bytes) go through the pre-scan,
//! the parse and an evaluation under every security mode. No input may panic, overflow the
//! stack of an ordinary 2 MiB thread (production parses on a far larger one), or take longer
//! than a per-case bound.
//!
//! `cargo test --release --test fuzz_parser` runs a short pass and the seed corpus;
//! `MOAT_FUZZ_SECS=600 cargo test --release --test fuzz_parser -- --ignored --nocapture` runs
//! for that long and writes every failing case into `MOAT_FUZZ_CORPUS` (default
//! `tests/fuzz/corpus/found`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use moat::policy::{analyse, evaluate_parsed, Ask, MapResolver, Policy, Request, Security};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// The longest one case may take (pre-scan, parse, three evaluations). The worst input the
/// bounds accept takes milliseconds in a release build; debug builds are far slower.
fn case_bound() -> Duration {
    if cfg!(debug_assertions) {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(1)
    }
}

/// Runs one input through everything; returns how long it took.
fn exercise(command: &str) -> Duration {
    let started = Instant::now();
    let parsed = analyse(command);
    let _ = parsed.command_names();
    let resolver = MapResolver::new()
        .with("ls", "/usr/bin/ls")
        .with("sh", "/bin/sh")
        .with("git", "/usr/bin/git")
        .with("python3", "/usr/bin/python3");
    // A variable off the allowlist, so the env rules run on every case too.
    let env = std::collections::BTreeMap::from([("FUZZ_VAR".to_string(), "1".to_string())]);
    for security in [Security::Deny, Security::Allowlist, Security::Full] {
        let policy = Policy {
            security,
            ask: Ask::OnMiss,
            allowlist: vec!["/usr/bin/ls".into(), "git".into()],
            deny_patterns: vec!["sudo *".into()],
            ask_patterns: vec!["git push *".into()],
            ..Policy::default()
        };
        let req = Request {
            command: parsed.command(),
            cwd: "/workspace",
            env: &env,
        };
        let eval = evaluate_parsed(&parsed, &req, &policy, &resolver);
        // Past a bound, every mode refuses, naming the bound (`deny` refuses anyway).
        if let (Some(why), false) = (parsed.refusal(), security == Security::Deny) {
            assert_eq!(eval.decision.reason(), Some(why.to_string().as_str()));
        }
    }
    started.elapsed()
}

/// Shell-like text, built from the grammar with nesting.
fn shell() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        "[a-z]{1,6}",
        Just("ls".to_string()),
        Just("git".to_string()),
        Just("sudo".to_string()),
        "'[a-z (){}$\"`#]{0,8}'",
        "\"[a-z (){}'#]{0,8}\"",
        "\\$[a-z]{1,3}",
        "\\$\\{[a-z]{1,3}(:-[a-z]{0,3})?\\}",
        "\\$\\(\\([0-9+* ()]{0,8}\\)\\)",
        "[@!?+*]\\([a-z|]{0,5}\\)",
        "\\$'[a-z\\\\']{0,6}'",
        "[a-z]{0,3}\\\\[(){}\"'`#]",
    ];
    let simple = prop::collection::vec(word, 1..5).prop_map(|w| w.join(" "));
    let leaf = prop_oneof![
        4 => simple,
        1 => "[(){}$\"'`\\\\#<>|&; \\n!@*?+\\[\\]a-z0-9=-]{0,40}",
        1 => any::<Vec<u8>>().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ];
    leaf.prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            (
                inner.clone(),
                inner.clone(),
                prop_oneof![
                    Just(" | "),
                    Just(" && "),
                    Just(" || "),
                    Just("; "),
                    Just("\n"),
                    Just(" & "),
                    Just(" |& ")
                ]
            )
                .prop_map(|(a, b, op)| format!("{a}{op}{b}")),
            inner.clone().prop_map(|a| format!("{{ {a}; }}")),
            inner.clone().prop_map(|a| format!("( {a} )")),
            inner.clone().prop_map(|a| format!("(({a}))")),
            inner.clone().prop_map(|a| format!("echo $({a})")),
            inner.clone().prop_map(|a| format!("echo \"$({a})\"")),
            inner.clone().prop_map(|a| format!("echo `{a}`")),
            inner.clone().prop_map(|a| format!("echo $(( {a} ))")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("if {a}; then {b}; fi")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("while {a}; do {b}; done")),
            inner
                .clone()
                .prop_map(|a| format!("for x in a b; do {a}; done")),
            inner
                .clone()
                .prop_map(|a| format!("case $x in a|b) {a};; (c) ;; esac")),
            inner
                .clone()
                .prop_map(|a| format!("[[ -n {a} && ( x == y ) ]]")),
            inner.clone().prop_map(|a| format!("f() {{ {a}; }}")),
            inner.clone().prop_map(|a| format!("cat <<EOF\n{a}\nEOF\n")),
            inner
                .clone()
                .prop_map(|a| format!("cat <<'EOF' | sh\n{a}\nEOF\n")),
            inner
                .clone()
                .prop_map(|a| format!("sh -c '{}'", a.replace('\'', "'\\''"))),
            inner
                .clone()
                .prop_map(|a| format!("{a} # comment ) ' \" ( {{\n")),
            inner.clone().prop_map(|a| format!("diff <({a}) >(cat)")),
            // Deep and unbalanced shapes, around and past the limits.
            (
                prop_oneof![
                    Just("{ "),
                    Just("("),
                    Just("(("),
                    Just("$("),
                    Just("\"$("),
                    Just("${a:-"),
                    Just("if a; then "),
                    Just("while a; do "),
                    Just("case x in x) "),
                    Just("[[ ( "),
                    Just("@("),
                    Just("$(("),
                    Just("! "),
                    Just("coproc "),
                    Just("function f { "),
                    Just("[[ ! "),
                    Just("for x in a; do case x in x) ")
                ],
                0usize..48,
                any::<bool>(),
                inner.clone(),
            )
                .prop_map(|(open, n, close, a)| {
                    let closer = match open {
                        "{ " => "; }",
                        "(" | "$(" => ")",
                        "((" | "$((" => "))",
                        "\"$(" => ")\"",
                        "${a:-" => "}",
                        "if a; then " => "; fi",
                        "while a; do " => "; done",
                        "case x in x) " => ";; esac",
                        "[[ ( " => " ) ]]",
                        "@(" => ")",
                        _ => "",
                    };
                    let closers = if close {
                        closer.repeat(n)
                    } else {
                        String::new()
                    };
                    format!("{}{a}{closers}", open.repeat(n))
                }),
        ]
    })
}

/// Writes a failing case where a later run (and a reviewer) finds it.
fn record(dir: &Path, kind: &str, command: &str) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let digest = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        command.hash(&mut h);
        h.finish()
    };
    let path = dir.join(format!("{kind}-{digest:016x}.sh"));
    let _ = std::fs::write(&path, command);
    path
}

proptest! {
    #![proptest_config(Config { cases: 512, failure_persistence: None, ..Config::default() })]

    #[test]
    fn no_input_panics_or_hangs(command in shell()) {
        let took = exercise(&command);
        prop_assert!(took < case_bound(), "{took:?} for {command:?}");
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus")
}

/// Every case in the seed corpus (the attack inputs among them) runs within the bound, and the
/// two attack inputs from issue 10 are refused before they are parsed.
#[test]
fn seed_corpus_runs_within_bounds() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "sh") {
            continue;
        }
        let command = std::fs::read_to_string(&path).expect("corpus file");
        let took = exercise(&command);
        eprintln!("{took:>12?}  {}", path.display());
        assert!(took < case_bound(), "{took:?} for {}", path.display());
        n += 1;
    }
    assert!(n >= 10, "seed corpus has {n} cases");
    let braces = std::fs::read_to_string(corpus_dir().join("attack-braces-400.sh")).unwrap();
    assert_eq!(
        analyse(&braces)
            .refusal()
            .map(ToString::to_string)
            .as_deref(),
        Some("command nests deeper than 32 levels")
    );
    let parens = std::fs::read_to_string(corpus_dir().join("attack-arith-16.sh")).unwrap();
    assert_eq!(
        analyse(&parens)
            .refusal()
            .map(ToString::to_string)
            .as_deref(),
        Some("command nests substitutions, parentheses or case statements deeper than 10 levels")
    );
}

/// The long-running mode: generates cases for `MOAT_FUZZ_SECS` seconds (default 60), writing
/// each one that panics or passes the time bound into `MOAT_FUZZ_CORPUS`. A case that hangs is
/// written before the watchdog aborts the run, so it is never lost.
#[test]
#[ignore = "long-running; set MOAT_FUZZ_SECS"]
fn fuzz_for_a_while() {
    let secs: u64 = std::env::var("MOAT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let dir = std::env::var("MOAT_FUZZ_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| corpus_dir().join("found"));
    let hang_after = case_bound() * 10;
    let current: std::sync::Arc<std::sync::Mutex<(Option<Instant>, String)>> =
        std::sync::Arc::new(std::sync::Mutex::new((None, String::new())));
    {
        let current = current.clone();
        let dir = dir.clone();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let guard = current.lock().unwrap();
            if let (Some(started), command) = &*guard {
                if started.elapsed() > hang_after {
                    let path = record(&dir, "hang", command);
                    eprintln!(
                        "hang: case running for {hang_after:?}, written to {}",
                        path.display()
                    );
                    std::process::abort();
                }
            }
        });
    }
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = shell();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut cases, mut panics, mut slow, mut refused) = (0u64, 0u64, 0u64, 0u64);
    let mut max = Duration::ZERO;
    let mut max_case = String::new();
    let mut sizes = 0usize;
    while Instant::now() < deadline {
        let command = strategy.new_tree(&mut runner).expect("case").current();
        *current.lock().unwrap() = (Some(Instant::now()), command.clone());
        let outcome = std::panic::catch_unwind(|| exercise(&command));
        current.lock().unwrap().0 = None;
        cases += 1;
        sizes += command.len();
        if analyse(&command).refusal().is_some() {
            refused += 1;
        }
        match outcome {
            Ok(took) => {
                if took > max {
                    max = took;
                    max_case = command.clone();
                }
                if took >= case_bound() {
                    slow += 1;
                    record(&dir, "slow", &command);
                }
            }
            Err(_) => {
                panics += 1;
                record(&dir, "panic", &command);
            }
        }
    }
    eprintln!(
        "fuzz: {cases} cases in {secs} s (mean {} bytes, {refused} refused by the bounds), \
         {panics} panics, {slow} over {:?}, max case time {max:?} for a {}-byte case",
        sizes / cases.max(1) as usize,
        case_bound(),
        max_case.len()
    );
    assert_eq!(
        (panics, slow),
        (0, 0),
        "failing cases written to {}",
        dir.display()
    );
}
