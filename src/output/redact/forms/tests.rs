//! Tests of the encoded forms a secret is redacted in.

use super::*;
use crate::output::Redactor;

/// Has `?`, `>` and `~`, so its base64 differs between the standard and URL-safe alphabets and
/// its percent-encoding between the encoders.
const SECRET: &str = "tok?>~en~~~???-secret9";

/// `(case, text)`: what an encoder (Python's base64/urllib, xxd, rev) printed for the secret,
/// with the bytes before and after it that change the encoding's alignment.
const ENCODED: &[(&str, &str)] = &[
    (
        "base64 std after 0 bytes, end",
        "dG9rPz5+ZW5+fn4/Pz8tc2VjcmV0OQ==",
    ),
    (
        "base64 url after 0 bytes, end",
        "dG9rPz5-ZW5-fn4_Pz8tc2VjcmV0OQ==",
    ),
    (
        "base64 url unpadded after 0 bytes, end",
        "dG9rPz5-ZW5-fn4_Pz8tc2VjcmV0OQ",
    ),
    (
        "base64 std after 0 bytes, newline",
        "dG9rPz5+ZW5+fn4/Pz8tc2VjcmV0OQo=",
    ),
    (
        "base64 url after 0 bytes, newline",
        "dG9rPz5-ZW5-fn4_Pz8tc2VjcmV0OQo=",
    ),
    (
        "base64 url unpadded after 0 bytes, newline",
        "dG9rPz5-ZW5-fn4_Pz8tc2VjcmV0OQo",
    ),
    (
        "base64 std after 1 bytes, end",
        "eHRvaz8+fmVufn5+Pz8/LXNlY3JldDk=",
    ),
    (
        "base64 url after 1 bytes, end",
        "eHRvaz8-fmVufn5-Pz8_LXNlY3JldDk=",
    ),
    (
        "base64 url unpadded after 1 bytes, end",
        "eHRvaz8-fmVufn5-Pz8_LXNlY3JldDk",
    ),
    (
        "base64 std after 1 bytes, newline",
        "eHRvaz8+fmVufn5+Pz8/LXNlY3JldDkK",
    ),
    (
        "base64 url after 1 bytes, newline",
        "eHRvaz8-fmVufn5-Pz8_LXNlY3JldDkK",
    ),
    (
        "base64 url unpadded after 1 bytes, newline",
        "eHRvaz8-fmVufn5-Pz8_LXNlY3JldDkK",
    ),
    (
        "base64 std after 2 bytes, end",
        "eHl0b2s/Pn5lbn5+fj8/Py1zZWNyZXQ5",
    ),
    (
        "base64 url after 2 bytes, end",
        "eHl0b2s_Pn5lbn5-fj8_Py1zZWNyZXQ5",
    ),
    (
        "base64 url unpadded after 2 bytes, end",
        "eHl0b2s_Pn5lbn5-fj8_Py1zZWNyZXQ5",
    ),
    (
        "base64 std after 2 bytes, newline",
        "eHl0b2s/Pn5lbn5+fj8/Py1zZWNyZXQ5Cg==",
    ),
    (
        "base64 url after 2 bytes, newline",
        "eHl0b2s_Pn5lbn5-fj8_Py1zZWNyZXQ5Cg==",
    ),
    (
        "base64 url unpadded after 2 bytes, newline",
        "eHl0b2s_Pn5lbn5-fj8_Py1zZWNyZXQ5Cg",
    ),
    (
        "hex lower (xxd -p)",
        "746f6b3f3e7e656e7e7e7e3f3f3f2d736563726574390a",
    ),
    (
        "hex upper",
        "746F6B3F3E7E656E7E7E7E3F3F3F2D736563726574390A",
    ),
    ("percent quote()", "tok%3F%3E~en~~~%3F%3F%3F-secret9"),
    ("percent quote(safe='')", "tok%3F%3E~en~~~%3F%3F%3F-secret9"),
    ("percent quote_plus()", "tok%3F%3E~en~~~%3F%3F%3F-secret9+x"),
    ("percent lower", "tok%3f%3e~en~~~%3f%3f%3f-secret9"),
    (
        "percent every byte",
        "%74%6F%6B%3F%3E%7E%65%6E%7E%7E%7E%3F%3F%3F%2D%73%65%63%72%65%74%39",
    ),
    ("reversed (rev)", "9terces-???~~~ne~>?kot"),
];

#[test]
fn every_encoding_is_hidden() {
    let r = Redactor::new(vec![("S".into(), SECRET.into())]);
    for (case, encoded) in ENCODED {
        let text = format!("before {encoded} after");
        let out = r.redact_all(&text);
        assert!(out.contains("[REDACTED:S]"), "{case}: {out}");
        let left = out
            .replacen("[REDACTED:S]", "", 1)
            .replacen("before ", "", 1)
            .replacen(" after", "", 1);
        // At most the characters that mix in neighbouring bytes, padding and a trailing
        // encoded newline stay visible.
        assert!(left.len() <= 8, "{case}: {encoded} left {left:?}");
        assert!(!left.contains(SECRET), "{case}");
    }
}

#[test]
fn streamed_like_one_shot() {
    for (case, encoded) in ENCODED {
        let text = format!("x {encoded} y");
        let mut r = Redactor::new(vec![("S".into(), SECRET.into())]);
        let want = r.redact_all(&text);
        let mut out = String::new();
        for c in text.chars() {
            r.push(&c.to_string(), &mut out);
        }
        r.finish(&mut out);
        assert_eq!(out, want, "{case}");
    }
}

#[test]
fn forms_table() {
    let f = encoded_forms("abcdefgh/ij");
    for want in [
        "ji/hgfedcba",            // reversed
        "6162636465666768",       // hex, a prefix of the whole
        "61626364656667682F696A", // upper hex
        "abcdefgh%2Fij",          // quote(safe='')
        "abcdefgh%2fij",          // lower
        "YWJjZGVmZ2gvaWo=",       // base64, aligned, padded
        "YWJjZGVmZ2gvaWo",        // unpadded
        "YWJjZGVmZ2gvaW",         // the fixed characters
    ] {
        assert!(f.iter().any(|x| x.contains(want)), "{want} not among {f:?}");
    }
    assert!(
        !f.contains(&"abcdefgh/ij".to_string()),
        "the value itself is not a form"
    );
    let mut sorted = f.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), f.len(), "no duplicates");
}

#[test]
fn short_values_get_no_short_forms() {
    // Three bytes: every derived form would be a few characters of ordinary text.
    let f = encoded_forms("abc");
    assert!(
        f.iter().all(|x| x.chars().count() >= MIN_FORM_CHARS),
        "{f:?}"
    );
    // But a short secret's literal is still hidden.
    let r = Redactor::new(vec![("S".into(), "abc".into())]);
    assert_eq!(r.redact_all("xabcx cba"), "x[REDACTED:S]x cba");
}

#[test]
fn base64_alignment_table() {
    // `(align, value, fixed part)`; checked against `base64` of `"\0" * align + value`.
    let rows = [
        (0, "Man", "TWFu"),
        (0, "Ma", "TW"),
        (1, "Man", "1hb"),
        (2, "Many", "NYW55"),
    ];
    for (align, value, want) in rows {
        let forms = base64_forms(value.as_bytes(), align, STD);
        assert_eq!(
            forms.first().map(String::as_str),
            Some(want),
            "{align} {value}"
        );
    }
}

#[test]
fn encoder_matches_reference() {
    let rows = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("\u{ff}\u{fe}", "w7/Dvg=="),
    ];
    for (input, want) in rows {
        assert_eq!(encode_base64(input.as_bytes(), STD), want, "{input:?}");
    }
    assert_eq!(encode_base64("\u{ff}\u{fe}".as_bytes(), URL), "w7_Dvg==");
}
