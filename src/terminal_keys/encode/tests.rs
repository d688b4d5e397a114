//! Tests of the key-name encoding.

use super::*;

fn enc(key: &str, app: bool) -> Result<Vec<u8>, KeyError> {
    encode_key(key, app)
}

#[test]
fn named_keys() {
    let rows: &[(&str, &[u8])] = &[
        ("Enter", b"\r"),
        ("enter", b"\r"),
        ("Return", b"\r"),
        ("Tab", b"\t"),
        ("BTab", b"\x1b[Z"),
        ("Escape", b"\x1b"),
        ("Esc", b"\x1b"),
        ("ESC", b"\x1b"),
        ("Space", b" "),
        ("BSpace", b"\x7f"),
        ("Backspace", b"\x7f"),
        ("Up", b"\x1b[A"),
        ("Down", b"\x1b[B"),
        ("Right", b"\x1b[C"),
        ("Left", b"\x1b[D"),
        ("Home", b"\x1b[H"),
        ("End", b"\x1b[F"),
        ("Insert", b"\x1b[2~"),
        ("IC", b"\x1b[2~"),
        ("Delete", b"\x1b[3~"),
        ("DC", b"\x1b[3~"),
        ("Del", b"\x1b[3~"),
        ("PageUp", b"\x1b[5~"),
        ("PgUp", b"\x1b[5~"),
        ("PPage", b"\x1b[5~"),
        ("PageDown", b"\x1b[6~"),
        ("PgDn", b"\x1b[6~"),
        ("NPage", b"\x1b[6~"),
        ("F1", b"\x1bOP"),
        ("F2", b"\x1bOQ"),
        ("F3", b"\x1bOR"),
        ("F4", b"\x1bOS"),
        ("F5", b"\x1b[15~"),
        ("F6", b"\x1b[17~"),
        ("F7", b"\x1b[18~"),
        ("F8", b"\x1b[19~"),
        ("F9", b"\x1b[20~"),
        ("F10", b"\x1b[21~"),
        ("F11", b"\x1b[23~"),
        ("F12", b"\x1b[24~"),
        ("f12", b"\x1b[24~"),
        ("KP0", b"\x1bOp"),
        ("KP5", b"\x1bOu"),
        ("KP9", b"\x1bOy"),
        ("KP/", b"\x1bOo"),
        ("KP*", b"\x1bOj"),
        ("KP-", b"\x1bOm"),
        ("KP+", b"\x1bOk"),
        ("KP.", b"\x1bOn"),
        ("KPEnter", b"\x1bOM"),
        ("  Enter  ", b"\r"),
    ];
    for (key, expected) in rows {
        assert_eq!(enc(key, false).unwrap(), *expected, "{key}");
    }
}

#[test]
fn application_cursor_mode() {
    let rows: &[(&str, &[u8], &[u8])] = &[
        ("Up", b"\x1b[A", b"\x1bOA"),
        ("Down", b"\x1b[B", b"\x1bOB"),
        ("Right", b"\x1b[C", b"\x1bOC"),
        ("Left", b"\x1b[D", b"\x1bOD"),
        ("Home", b"\x1b[H", b"\x1bOH"),
        ("End", b"\x1b[F", b"\x1bOF"),
        // Modified keys use the xterm form in both modes.
        ("C-Up", b"\x1b[1;5A", b"\x1b[1;5A"),
        ("S-End", b"\x1b[1;2F", b"\x1b[1;2F"),
        // Keys outside the cursor set do not change.
        ("PageUp", b"\x1b[5~", b"\x1b[5~"),
        ("F1", b"\x1bOP", b"\x1bOP"),
        ("Enter", b"\r", b"\r"),
        ("x", b"x", b"x"),
    ];
    for (key, normal, app) in rows {
        assert_eq!(enc(key, false).unwrap(), *normal, "{key} normal");
        assert_eq!(enc(key, true).unwrap(), *app, "{key} app");
    }
}

#[test]
fn modifiers() {
    let rows: &[(&str, &[u8])] = &[
        ("C-a", b"\x01"),
        ("C-c", b"\x03"),
        ("C-z", b"\x1a"),
        ("C-A", b"\x01"),
        ("c-d", b"\x04"),
        ("C-@", b"\x00"),
        ("C-[", b"\x1b"),
        ("C-\\", b"\x1c"),
        ("C-]", b"\x1d"),
        ("C-^", b"\x1e"),
        ("C-_", b"\x1f"),
        ("C-?", b"\x7f"),
        ("C-Space", b"\x00"),
        ("^C", b"\x03"),
        ("^c", b"\x03"),
        ("^[", b"\x1b"),
        ("^?", b"\x7f"),
        ("^@", b"\x00"),
        ("^^", b"\x1e"),
        ("M-x", b"\x1bx"),
        ("m-x", b"\x1bx"),
        ("M-X", b"\x1bX"),
        ("M--", b"\x1b-"),
        ("M-é", "\x1bé".as_bytes()),
        ("S-a", b"A"),
        ("S-A", b"A"),
        ("S-1", b"1"),
        ("C-M-x", b"\x1b\x18"),
        ("M-C-x", b"\x1b\x18"),
        ("C-S-a", b"\x01"),
        ("M-S-a", b"\x1bA"),
        ("C-C-c", b"\x03"),
        ("M-Enter", b"\x1b\r"),
        ("M-Escape", b"\x1b\x1b"),
        ("M-BSpace", b"\x1b\x7f"),
        ("M-Tab", b"\x1b\t"),
        ("S-Tab", b"\x1b[Z"),
        ("M-S-Tab", b"\x1b\x1b[Z"),
        ("M-BTab", b"\x1b\x1b[Z"),
        ("S-BTab", b"\x1b[Z"),
        ("M-Space", b"\x1b "),
        ("S-Space", b" "),
        ("C-M-Space", b"\x1b\x00"),
        ("M-KPEnter", b"\x1b\x1bOM"),
        ("S-Up", b"\x1b[1;2A"),
        ("M-Up", b"\x1b[1;3A"),
        ("M-S-Up", b"\x1b[1;4A"),
        ("C-Up", b"\x1b[1;5A"),
        ("C-S-Up", b"\x1b[1;6A"),
        ("C-M-Up", b"\x1b[1;7A"),
        ("C-M-S-Up", b"\x1b[1;8A"),
        ("C-Right", b"\x1b[1;5C"),
        ("S-Down", b"\x1b[1;2B"),
        ("M-Left", b"\x1b[1;3D"),
        ("C-Home", b"\x1b[1;5H"),
        ("C-End", b"\x1b[1;5F"),
        ("S-PageUp", b"\x1b[5;2~"),
        ("C-NPage", b"\x1b[6;5~"),
        ("M-Delete", b"\x1b[3;3~"),
        ("S-Insert", b"\x1b[2;2~"),
        ("S-F1", b"\x1b[1;2P"),
        ("C-F2", b"\x1b[1;5Q"),
        ("M-F3", b"\x1b[1;3R"),
        ("C-S-F4", b"\x1b[1;6S"),
        ("S-F5", b"\x1b[15;2~"),
        ("C-F12", b"\x1b[24;5~"),
        ("C-M-S-F10", b"\x1b[21;8~"),
    ];
    for (key, expected) in rows {
        assert_eq!(enc(key, false).unwrap(), *expected, "{key}");
    }
}

#[test]
fn literal_characters() {
    let rows: &[(&str, &[u8])] = &[
        ("q", b"q"),
        ("y", b"y"),
        ("Y", b"Y"),
        ("1", b"1"),
        (" ", b" "),
        ("-", b"-"),
        ("^", b"^"),
        ("C", b"C"),
        ("é", "é".as_bytes()),
        ("😀", "😀".as_bytes()),
        ("\t", b"\t"),
        (" q ", b"q"),
    ];
    for (key, expected) in rows {
        assert_eq!(enc(key, false).unwrap(), *expected, "{key:?}");
    }
}

#[test]
fn errors() {
    let unknown = |k: &str| KeyError::Unknown { key: k.to_owned() };
    let modifier = |k: &str, m: &'static str, b: &str| KeyError::Modifier {
        key: k.to_owned(),
        modifier: m,
        base: b.to_owned(),
    };
    let rows: Vec<(&str, KeyError)> = vec![
        ("", KeyError::Empty { key: String::new() }),
        (
            "   ",
            KeyError::Empty {
                key: "   ".to_owned(),
            },
        ),
        ("Foo", unknown("Foo")),
        ("hello", unknown("hello")),
        ("F13", unknown("F13")),
        ("F0", unknown("F0")),
        ("KP10", unknown("KP10")),
        ("C-Foo", unknown("C-Foo")),
        ("X-a", unknown("X-a")),
        ("C-", unknown("C-")),
        ("^ab", unknown("^ab")),
        ("C-1", modifier("C-1", "ctrl", "1")),
        ("C--", modifier("C--", "ctrl", "-")),
        ("C-é", modifier("C-é", "ctrl", "é")),
        ("^1", modifier("^1", "ctrl", "1")),
        ("C-Enter", modifier("C-Enter", "ctrl", "Enter")),
        ("S-Enter", modifier("S-Enter", "shift", "Enter")),
        ("C-Tab", modifier("C-Tab", "ctrl", "Tab")),
        ("C-S-Tab", modifier("C-S-Tab", "ctrl", "Tab")),
        ("C-BTab", modifier("C-BTab", "ctrl", "BTab")),
        ("C-Escape", modifier("C-Escape", "ctrl", "Escape")),
        ("S-BSpace", modifier("S-BSpace", "shift", "BSpace")),
        ("C-KP1", modifier("C-KP1", "ctrl", "KP1")),
    ];
    for (key, expected) in rows {
        assert_eq!(enc(key, false).unwrap_err(), expected, "{key:?}");
    }
}

#[test]
fn error_messages() {
    let err = enc("Foo", false).unwrap_err().to_string();
    assert!(
        err.starts_with("encode key \"Foo\": unknown key name"),
        "{err}"
    );
    let err = enc("C-1", false).unwrap_err().to_string();
    assert_eq!(
        err,
        "encode key \"C-1\": ctrl cannot be combined with \"1\""
    );
}

#[test]
fn encode_list() {
    let keys: Vec<String> = ["i", "h", "i", "Escape", ":", "w", "q", "Enter"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(encode_keys(&keys, false).unwrap(), b"ihi\x1b:wq\r");
    let keys: Vec<String> = vec!["Up".into(), "C-c".into()];
    assert_eq!(encode_keys(&keys, true).unwrap(), b"\x1bOA\x03");
    assert_eq!(encode_keys(&[], false).unwrap(), b"");
    let keys: Vec<String> = vec!["Enter".into(), "Nope".into()];
    assert_eq!(
        encode_keys(&keys, false).unwrap_err(),
        KeyError::Unknown { key: "Nope".into() }
    );
}
