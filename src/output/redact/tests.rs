//! Tests of the redactor.

use super::*;
use proptest::prelude::*;

fn redactor(secrets: &[(&str, &str)]) -> Redactor {
    Redactor::literal(
        secrets
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    )
}

fn stream(r: &mut Redactor, pushes: &[&str]) -> String {
    let mut out = String::new();
    for p in pushes {
        r.push(p, &mut out);
    }
    r.finish(&mut out);
    out
}

/// Obvious reference: mark all occurrences, merge overlapping ones, name each region after its
/// longest value (first configured on a tie).
fn reference(secrets: &[(&str, &str)], text: &str) -> String {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (n, v) in secrets {
        if !v.is_empty() && !seen.iter().any(|(_, sv)| sv == v) {
            seen.push((n, v));
        }
    }
    let mut occ: Vec<(usize, usize, usize)> = Vec::new();
    for (idx, (_, v)) in seen.iter().enumerate() {
        for start in 0..text.len() {
            if text.is_char_boundary(start) && text[start..].starts_with(v) {
                occ.push((start, start + v.len(), idx));
            }
        }
    }
    occ.sort();
    let better = |a: usize, b: usize| {
        let (la, lb) = (seen[a].1.len(), seen[b].1.len());
        la > lb || (la == lb && a < b)
    };
    let mut out = String::new();
    let mut pos = 0;
    let mut i = 0;
    while i < occ.len() {
        let (start, mut end, mut name) = occ[i];
        i += 1;
        while i < occ.len() && occ[i].0 < end {
            end = end.max(occ[i].1);
            if better(occ[i].2, name) {
                name = occ[i].2;
            }
            i += 1;
        }
        out.push_str(&text[pos..start]);
        out.push_str(&format!("[REDACTED:{}]", seen[name].0));
        pos = end;
    }
    out.push_str(&text[pos..]);
    out
}

#[test]
fn table() {
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str], &'a str);
    let rows: &[Row] = &[
        ("no secrets", &[], &["a b c"], "a b c"),
        ("only empty values", &[("E", "")], &["a b c"], "a b c"),
        (
            "simple",
            &[("TOKEN", "abc123")],
            &["x abc123 y"],
            "x [REDACTED:TOKEN] y",
        ),
        (
            "whole text",
            &[("T", "abc123")],
            &["abc123"],
            "[REDACTED:T]",
        ),
        (
            "twice",
            &[("T", "abc123")],
            &["abc123 abc123"],
            "[REDACTED:T] [REDACTED:T]",
        ),
        (
            "adjacent",
            &[("T", "abc123")],
            &["abc123abc123"],
            "[REDACTED:T][REDACTED:T]",
        ),
        (
            "split in two",
            &[("T", "abc123")],
            &["x ab", "c123 y"],
            "x [REDACTED:T] y",
        ),
        (
            "split in many",
            &[("T", "abc123")],
            &["a", "b", "c", "1", "2", "3"],
            "[REDACTED:T]",
        ),
        (
            "split with empty pushes",
            &[("T", "abc")],
            &["", "a", "", "bc", ""],
            "[REDACTED:T]",
        ),
        (
            "partial never completes",
            &[("T", "abc123")],
            &["ab", "c12", "x"],
            "abc12x",
        ),
        (
            "partial at end",
            &[("T", "abc123")],
            &["xx abc12"],
            "xx abc12",
        ),
        (
            "restart inside partial",
            &[("T", "aab")],
            &["a", "a", "a", "b"],
            "a[REDACTED:T]",
        ),
        (
            "two secrets",
            &[("A", "foo"), ("B", "bar")],
            &["foo-bar"],
            "[REDACTED:A]-[REDACTED:B]",
        ),
        (
            "same start longest wins",
            &[("A", "abc"), ("B", "abcdef")],
            &["abcdef"],
            "[REDACTED:B]",
        ),
        (
            "same start longer fails",
            &[("A", "abc"), ("B", "abcdef")],
            &["abcdeX"],
            "[REDACTED:A]deX",
        ),
        (
            "same start split",
            &[("A", "abc"), ("B", "abcdef")],
            &["ab", "cd", "ef!"],
            "[REDACTED:B]!",
        ),
        (
            "contained",
            &[("A", "abc"), ("B", "xabcx")],
            &["xabcx abc"],
            "[REDACTED:B] [REDACTED:A]",
        ),
        (
            "overlap merges",
            &[("A", "abc"), ("B", "bcdef")],
            &["abcdef"],
            "[REDACTED:B]",
        ),
        (
            "overlap merges split",
            &[("A", "abc"), ("B", "bcdef")],
            &["abc", "def"],
            "[REDACTED:B]",
        ),
        (
            "overlap tie first wins",
            &[("A", "abcd"), ("B", "cdef")],
            &["abcdef"],
            "[REDACTED:A]",
        ),
        (
            "overlap tie order",
            &[("B", "cdef"), ("A", "abcd")],
            &["abcdef"],
            "[REDACTED:B]",
        ),
        ("self overlap", &[("S", "aa")], &["aaa"], "[REDACTED:S]"),
        (
            "self overlap chain",
            &[("S", "aa")],
            &["a", "a", "a", "a", "a", "b"],
            "[REDACTED:S]b",
        ),
        (
            "duplicate value first name",
            &[("A", "xyz"), ("B", "xyz")],
            &["xyz"],
            "[REDACTED:A]",
        ),
        (
            "unicode",
            &[("P", "pässwörd")],
            &["my pä", "ssw", "örd!"],
            "my [REDACTED:P]!",
        ),
        (
            "unicode near miss",
            &[("P", "pässwörd")],
            &["pässwort"],
            "pässwort",
        ),
        (
            "newline in value",
            &[("K", "line1\nline2")],
            &["line1\n", "line2\n"],
            "[REDACTED:K]\n",
        ),
    ];
    for (name, secrets, pushes, expected) in rows {
        let mut r = redactor(secrets);
        assert_eq!(stream(&mut r, pushes), *expected, "{name}: stream");
        assert_eq!(
            r.redact_all(&pushes.concat()),
            *expected,
            "{name}: one shot"
        );
        assert_eq!(
            reference(secrets, &pushes.concat()),
            *expected,
            "{name}: reference"
        );
    }
}

#[test]
fn holds_back_only_possible_prefix() {
    let mut r = redactor(&[("T", "abc123")]);
    let mut out = String::new();
    r.push("Password: ab", &mut out);
    assert_eq!(out, "Password: ");
    r.push("X> ", &mut out);
    assert_eq!(out, "Password: abX> ");
    r.push("abc1", &mut out);
    assert_eq!(out, "Password: abX> ");
    r.push("23\n", &mut out);
    assert_eq!(out, "Password: abX> [REDACTED:T]\n");
    r.finish(&mut out);
    assert_eq!(out, "Password: abX> [REDACTED:T]\n");
}

#[test]
fn region_marker_waits_for_possible_extension() {
    let mut r = redactor(&[("A", "abc"), ("B", "bcdef")]);
    let mut out = String::new();
    r.push("abc", &mut out);
    assert_eq!(out, "");
    r.push("d", &mut out);
    assert_eq!(out, "");
    r.push("x", &mut out);
    assert_eq!(out, "[REDACTED:A]dx");
}

#[test]
fn reusable_after_finish() {
    let mut r = redactor(&[("T", "abc")]);
    assert_eq!(stream(&mut r, &["xa"]), "xa");
    // A new stream does not continue the old one.
    assert_eq!(stream(&mut r, &["bc"]), "bc");
    assert_eq!(stream(&mut r, &["a", "bc"]), "[REDACTED:T]");
}

#[test]
fn buffer_stays_small_on_long_streams() {
    let mut r = redactor(&[("S", "aaaa"), ("T", "secret")]);
    let mut out = String::new();
    for _ in 0..10_000 {
        r.push("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &mut out);
        assert!(r.stream.buf.len() < 64);
    }
    r.push("b secret", &mut out);
    r.finish(&mut out);
    assert_eq!(out, "[REDACTED:S]b [REDACTED:T]");
}

#[test]
fn suffix_prefix() {
    let rows: &[(&str, &str, usize)] = &[
        ("", "abc", 0),
        ("xyz", "abc", 0),
        ("xa", "abc", 1),
        ("xab", "abc", 2),
        ("abc", "abc", 0),
        ("aab", "aabaab", 3),
        ("aabaa", "aabaab", 5),
        ("aaaaa", "aaaaaa", 5),
    ];
    for (text, pattern, expected) in rows {
        let fail = failure_function(pattern.as_bytes());
        assert_eq!(
            suffix_prefix_len(text.as_bytes(), pattern.as_bytes(), &fail),
            *expected,
            "{text} / {pattern}"
        );
    }
}

fn split_text(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|p| text.is_char_boundary(*p))
        .collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(text[last..p].to_string());
        last = p;
    }
    out.push(text[last..].to_string());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn streaming_matches_reference(
        values in prop::collection::vec("[abé]{0,5}", 0..4),
        text in "[abéc]{0,60}",
        cuts in prop::collection::vec(any::<usize>(), 0..15),
    ) {
        let names = ["A", "B", "C", "D"];
        let secrets: Vec<(&str, &str)> =
            values.iter().enumerate().map(|(i, v)| (names[i], v.as_str())).collect();
        let expected = reference(&secrets, &text);
        let mut r = redactor(&secrets);
        prop_assert_eq!(r.redact_all(&text), expected.clone());
        let pieces = split_text(&text, &cuts);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        prop_assert_eq!(stream(&mut r, &refs), expected.clone());
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        prop_assert_eq!(stream(&mut r, &refs), expected);
    }

    #[test]
    fn no_secret_survives(
        secret in "[a-z0-9]{1,12}",
        text in "[a-z0-9 ]{0,80}",
        cuts in prop::collection::vec(any::<usize>(), 0..10),
    ) {
        let full = format!("{text}{secret}{text}");
        let mut r = redactor(&[("X", secret.as_str())]);
        let pieces = split_text(&full, &cuts);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let out = stream(&mut r, &refs);
        prop_assert!(!out.contains(secret.as_str()), "{out:?}");
        prop_assert!(out.contains("[REDACTED:X]"));
    }
}

fn throughput(r: &mut Redactor, chunk: &str, total: usize) -> f64 {
    let mut out = String::with_capacity(chunk.len() * 2);
    let rounds = total / chunk.len();
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        out.clear();
        r.push(chunk, &mut out);
    }
    r.finish(&mut out);
    let secs = start.elapsed().as_secs_f64();
    (rounds * chunk.len()) as f64 / secs / 1e9
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn redact_throughput() {
    let chunk = "The quick brown fox jumps over the lazy dog; token=ghp_notthesecret\n".repeat(960);
    let one = vec![(
        "GH_TOKEN".to_string(),
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789".to_string(),
    )];
    let ten: Vec<(String, String)> = (0..10)
        .map(|i| {
            (
                format!("S{i}"),
                format!("secret-value-{i}-{}", "x".repeat(20 + i)),
            )
        })
        .collect();
    println!(
        "redact 0 secrets:  {:.2} GB/s",
        throughput(&mut Redactor::new(vec![]), &chunk, 1 << 30)
    );
    println!(
        "redact 1 secret, value only:    {:.2} GB/s",
        throughput(&mut Redactor::literal(one.clone()), &chunk, 1 << 29)
    );
    println!(
        "redact 1 secret, with forms:    {:.2} GB/s",
        throughput(&mut Redactor::new(one), &chunk, 1 << 29)
    );
    println!(
        "redact 10 secrets, value only:  {:.2} GB/s",
        throughput(&mut Redactor::literal(ten.clone()), &chunk, 1 << 28)
    );
    println!(
        "redact 10 secrets, with forms:  {:.2} GB/s",
        throughput(&mut Redactor::new(ten), &chunk, 1 << 28)
    );
}
