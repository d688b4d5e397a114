//! Tests of the hex input.

use super::*;

fn items(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn table() {
    let rows: &[(&[&str], &[u8])] = &[
        (&[], b""),
        (&["1b"], b"\x1b"),
        (&["0x1b"], b"\x1b"),
        (&["0X1B"], b"\x1b"),
        (&["\\x1b"], b"\x1b"),
        (&["a"], b"\x0a"),
        (&["0xd"], b"\x0d"),
        (&["00"], b"\x00"),
        (&["ff", "FF"], b"\xff\xff"),
        (&["1b5b41"], b"\x1b[A"),
        (&["1b 5b 41"], b"\x1b[A"),
        (&["  1b   5b\t41 "], b"\x1b[A"),
        (&["0x1b,0x5b,0x41"], b"\x1b[A"),
        (&["0x1b5b"], b"\x1b["),
        (&["0d", "0x0a"], b"\r\n"),
        (&["68", "69"], b"hi"),
    ];
    for (input, expected) in rows {
        assert_eq!(decode_hex(&items(input)).unwrap(), *expected, "{input:?}");
    }
}

#[test]
fn errors() {
    let rows: &[(&[&str], &str)] = &[
        (&["zz"], "zz"),
        (&["0d", "zz", "0a"], "zz"),
        (&[""], ""),
        (&["   "], "   "),
        (&["0x"], "0x"),
        (&["1b5"], "1b5"),
        (&["1b 5g"], "1b 5g"),
        (&["-1"], "-1"),
        (&["0x0x1b"], "0x0x1b"),
        (&["ü"], "ü"),
        (&["1b;5b"], "1b;5b"),
    ];
    for (input, bad) in rows {
        assert_eq!(
            decode_hex(&items(input)).unwrap_err(),
            KeyError::Hex {
                item: bad.to_string()
            },
            "{input:?}"
        );
    }
    let msg = decode_hex(&items(&["zz"])).unwrap_err().to_string();
    assert!(
        msg.starts_with("decode hex item \"zz\": expected hex bytes"),
        "{msg}"
    );
}
