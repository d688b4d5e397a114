//! Tests of the capped text.

use super::*;
use proptest::prelude::*;

/// What `render` must return, computed the slow and obvious way.
fn reference(max: usize, pushes: &[&str]) -> String {
    let all: Vec<char> = pushes.iter().flat_map(|s| s.chars()).collect();
    if all.len() <= max {
        return all.into_iter().collect();
    }
    let head_cap = max / 10;
    let tail_cap = max - head_cap;
    let head: String = all[..head_cap].iter().collect();
    let tail: String = all[all.len() - tail_cap..].iter().collect();
    let dropped = all.len() - max;
    format!("{head}\n[… {dropped} chars truncated …]\n{tail}")
}

fn capped(max: usize, pushes: &[&str]) -> CappedText {
    let mut c = CappedText::new(max);
    for p in pushes {
        c.push_str(p);
    }
    c
}

#[test]
fn table() {
    let long_ascii = "x".repeat(50);
    // (name, max chars, pushes, rendered, total chars, truncated).
    type Row<'a> = (&'a str, usize, &'a [&'a str], &'a str, u64, bool);
    let rows: &[Row] = &[
        ("empty", 20, &[], "", 0, false),
        ("empty pushes", 20, &["", ""], "", 0, false),
        ("short", 20, &["hello"], "hello", 5, false),
        (
            "exactly max",
            20,
            &["abcdefghijklmnopqrst"],
            "abcdefghijklmnopqrst",
            20,
            false,
        ),
        (
            "one over",
            20,
            &["abcdefghijklmnopqrstu"],
            "ab\n[… 1 chars truncated …]\ndefghijklmnopqrstu",
            21,
            true,
        ),
        (
            "many small pushes",
            20,
            &["abcde", "fghij", "klmno", "pqrst", "uvwxy", "z"],
            "ab\n[… 6 chars truncated …]\nijklmnopqrstuvwxyz",
            26,
            true,
        ),
        (
            "unicode counted as chars",
            10,
            &["äöü€😀", "αβγδε", "ж"],
            "ä\n[… 1 chars truncated …]\nü€😀αβγδεж",
            11,
            true,
        ),
        (
            "one huge push",
            10,
            &[long_ascii.as_str()],
            "x\n[… 40 chars truncated …]\nxxxxxxxxx",
            50,
            true,
        ),
        (
            "zero cap",
            0,
            &["abc"],
            "\n[… 3 chars truncated …]\n",
            3,
            true,
        ),
        ("zero cap empty", 0, &[], "", 0, false),
        (
            "cap below ten has no head",
            5,
            &["abcdefg"],
            "\n[… 2 chars truncated …]\ncdefg",
            7,
            true,
        ),
    ];
    for (name, max, pushes, expected, total, truncated) in rows {
        let c = capped(*max, pushes);
        assert_eq!(c.render(), *expected, "{name}");
        assert_eq!(c.render(), reference(*max, pushes), "{name}: reference");
        assert_eq!(c.total_chars(), *total, "{name}: total");
        assert_eq!(c.truncated(), *truncated, "{name}: truncated");
    }
}

#[test]
fn clamp() {
    let rows = [
        (None, 200_000),
        (Some(0), 1_000),
        (Some(999), 1_000),
        (Some(1_000), 1_000),
        (Some(5_000), 5_000),
        (Some(200_000), 200_000),
        (Some(200_001), 200_000),
        (Some(usize::MAX), 200_000),
    ];
    for (input, expected) in rows {
        assert_eq!(clamp_max_chars(input), expected, "{input:?}");
    }
}

#[test]
fn marker_count_is_exact_at_scale() {
    let mut c = CappedText::new(1_000);
    let chunk = "0123456789".repeat(100);
    for _ in 0..10_000 {
        c.push_str(&chunk);
    }
    let out = c.render();
    assert!(
        out.contains("\n[… 9999000 chars truncated …]\n"),
        "{}",
        &out[..200]
    );
    assert_eq!(c.total_chars(), 10_000_000);
    assert!(out.starts_with(&chunk[..100]));
    assert!(out.ends_with(&chunk[100..]));
}

#[test]
fn memory_stays_bounded() {
    let mut c = CappedText::new(1_000);
    for i in 0..100_000 {
        c.push_str(if i % 2 == 0 { "ab" } else { "ü€" });
    }
    assert!(c.tail.capacity() < 64 * 1024, "{}", c.tail.capacity());
    assert_eq!(c.total_chars(), 200_000);
}

/// A compacted view renders as before and holds its characters, not the dead prefix or the
/// spare capacity pushes left.
#[test]
fn compact_keeps_the_text_and_drops_the_rest() {
    let mut c = CappedText::new(10_000);
    for i in 0..2_000 {
        c.push_str(&format!("line {i}\n"));
    }
    let before = c.render();
    assert!(c.held_bytes() > 12_000, "{}", c.held_bytes());
    c.compact();
    assert_eq!(c.render(), before);
    assert_eq!(c.held_bytes(), c.head.len() + c.tail.len());
    assert!(c.held_bytes() <= 10_000, "{}", c.held_bytes());
}

#[test]
fn last_chars() {
    let c = capped(20, &["abc", "def"]);
    assert_eq!(c.last_chars(0), "");
    assert_eq!(c.last_chars(2), "ef");
    assert_eq!(c.last_chars(4), "cdef");
    assert_eq!(c.last_chars(100), "abcdef");
    let c = capped(20, &["αβγδεζηθικλμνξοπρστυφχψω"]);
    assert_eq!(c.last_chars(3), "χψω");
    // Truncated: never joins the head onto the tail.
    assert_eq!(c.last_chars(100).chars().count(), 18);
}

#[test]
fn char_offset_cases() {
    let s = "aé€😀b".repeat(40);
    for k in 0..=s.chars().count() + 2 {
        let expected = s.char_indices().nth(k).map_or(s.len(), |(i, _)| i);
        assert_eq!(char_offset(&s, k), expected, "{k}");
    }
}

fn text_piece() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{0,30}", "[a-zäöü€😀\n]{0,30}", "\\PC{0,10}",]
}

proptest! {
    #[test]
    fn matches_reference(max in 0usize..60, pushes in prop::collection::vec(text_piece(), 0..20)) {
        let refs: Vec<&str> = pushes.iter().map(String::as_str).collect();
        let c = capped(max, &refs);
        prop_assert_eq!(c.render(), reference(max, &refs));
        let total: usize = refs.iter().map(|s| s.chars().count()).sum();
        prop_assert_eq!(c.total_chars(), total as u64);
        prop_assert_eq!(c.truncated(), total > max);
    }

    #[test]
    fn last_chars_matches_reference(pushes in prop::collection::vec(text_piece(), 0..10), n in 0usize..80) {
        let refs: Vec<&str> = pushes.iter().map(String::as_str).collect();
        let c = capped(1_000, &refs);
        let all: Vec<char> = refs.iter().flat_map(|s| s.chars()).collect();
        let expected: String = all[all.len().saturating_sub(n)..].iter().collect();
        prop_assert_eq!(c.last_chars(n), expected);
    }
}

fn throughput(chunk: &str, total: usize) -> f64 {
    let mut c = CappedText::new(DEFAULT_MAX_CHARS);
    let rounds = total / chunk.len();
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        c.push_str(chunk);
    }
    let out = c.render();
    let secs = start.elapsed().as_secs_f64();
    assert!(c.truncated() && out.len() > DEFAULT_MAX_CHARS);
    (rounds * chunk.len()) as f64 / secs / 1e9
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn capped_throughput() {
    let ascii = "The quick brown fox jumps over the lazy dog.\n".repeat(1490);
    let utf8 = "Grüße, 世界! Ünïcödé téxt — “quotes”.\n".repeat(1400);
    let small = "line of output\n";
    println!(
        "capped ascii 64K pushes: {:.2} GB/s",
        throughput(&ascii, 1 << 30)
    );
    println!(
        "capped utf8 64K pushes:  {:.2} GB/s",
        throughput(&utf8, 1 << 28)
    );
    println!(
        "capped 15-byte pushes:   {:.2} GB/s",
        throughput(small, 1 << 28)
    );
}
