//! Tests of the sanitizer.

use super::*;
use proptest::prelude::*;

/// Sanitizes `chunks` in order with one sanitizer, then finishes.
fn run_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut s = Sanitizer::new();
    let mut out = String::new();
    for c in chunks {
        s.push(c, &mut out);
    }
    s.finish(&mut out);
    out
}

fn run(input: &[u8]) -> String {
    run_chunks([input])
}

/// Checks `input` gives `expected` in one push, split in two at every position, split in three
/// at every pair of positions (short inputs) and fed byte by byte.
fn check(name: &str, input: &[u8], expected: &str) {
    assert_eq!(run(input), expected, "{name}: one push");
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(run_chunks([a, b]), expected, "{name}: split at {cut}");
    }
    if input.len() <= 40 {
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let got = run_chunks([&input[..i], &input[i..j], &input[j..]]);
                assert_eq!(got, expected, "{name}: split at {i} and {j}");
            }
        }
    }
    let bytewise = run_chunks(input.chunks(1));
    assert_eq!(bytewise, expected, "{name}: byte by byte");
}

#[test]
fn table() {
    let rows: &[(&str, &[u8], &str)] = &[
        ("empty", b"", ""),
        ("plain", b"hello world\n", "hello world\n"),
        ("tab and line feed kept", b"a\tb\nc", "a\tb\nc"),
        ("sgr", b"\x1b[31mred\x1b[0m plain", "red plain"),
        ("sgr 256", b"\x1b[38;5;196mX\x1b[m", "X"),
        ("sgr colon subparams", b"\x1b[38:2::1:2:3mX", "X"),
        ("private mode", b"\x1b[?1049h\x1b[?25lscreen", "screen"),
        ("csi intermediate", b"a\x1b[2 qb", "ab"),
        ("csi cursor moves", b"\x1b[2J\x1b[1;1Htop\x1b[K", "top"),
        ("osc bel", b"\x1b]0;title\x07after", "after"),
        ("osc st", b"\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("osc utf8 body", "\x1b]0;tïtlé 世\x07ok".as_bytes(), "ok"),
        ("osc 52 clipboard", b"\x1b]52;c;aGVsbG8=\x07x", "x"),
        ("dcs", b"\x1bPq#0;2;0;0;0\x1b\\done", "done"),
        ("dcs bel is body", b"\x1bPab\x07cd\x1b\\x", "x"),
        ("sos", b"\x1bXsos\x1b\\a", "a"),
        ("pm", b"\x1b^pm\x1b\\b", "b"),
        ("apc", b"\x1b_apc body\x1b\\c", "c"),
        ("apc bel is body", b"\x1b_a\x07b\x1b\\c", "c"),
        ("save restore", b"\x1b7a\x1b8", "a"),
        ("keypad modes", b"\x1b=x\x1b>", "x"),
        ("reset", b"\x1bcreset", "reset"),
        ("reverse index", b"\x1bMx\x1bDy\x1bEz", "xyz"),
        ("charset", b"\x1b(Bx\x1b)0y", "xy"),
        ("dec line", b"\x1b#8z", "z"),
        ("utf8 select", b"\x1b%Gw", "w"),
        ("stray st", b"a\x1b\\b", "ab"),
        ("esc esc", b"\x1b\x1b[31mX", "X"),
        ("bare esc at end", b"abc\x1b", "abc"),
        ("unterminated csi at end", b"abc\x1b[12", "abc"),
        ("unterminated osc at end", b"abc\x1b]0;ti", "abc"),
        ("can aborts csi", b"\x1b[31\x18X", "X"),
        ("sub aborts osc", b"\x1b]0;t\x1aX", "X"),
        ("esc aborts osc", b"\x1b]0;t\x1b[31mX", "X"),
        ("esc aborts dcs", b"\x1bPabc\x1bcX", "X"),
        ("newline abandons csi", b"\x1b[3\n1mX", "\n1mX"),
        ("cr abandons csi", b"\x1b[3\r1mX", "\n1mX"),
        ("tab inside csi executes", b"\x1b[3\t1mX", "\tX"),
        ("nul inside csi dropped", b"\x1b[3\x001mX", "X"),
        ("del inside csi ignored", b"\x1b[3\x7f1mX", "X"),
        ("newline abandons escape", b"\x1b\n(Bx", "\n(Bx"),
        ("newline abandons osc", b"\x1b]0;title\nnext line", "\nnext line"),
        ("cr abandons osc", b"\x1b]0;title\rnext", "\nnext"),
        ("newline abandons dcs", b"\x1bPq#0\nline", "\nline"),
        ("newline abandons string escape", b"\x1b]0;t\x1b\nline", "\nline"),
        ("newline abandons c1 osc", "\u{9d}0;t\nline".as_bytes(), "\nline"),
        ("osc on one line still stripped", b"a\x1b]0;t\x07b\nc", "ab\nc"),
        ("non-ascii aborts csi", "\x1b[3é!".as_bytes(), "é!"),
        ("non-ascii aborts escape", "\x1bé".as_bytes(), "é"),
        ("c1 csi", "\u{9b}31mX".as_bytes(), "X"),
        ("c1 osc st", "\u{9d}0;t\u{9c}Y".as_bytes(), "Y"),
        ("c1 osc bel", "\u{9d}0;t\x07Y".as_bytes(), "Y"),
        ("c1 dcs", "\u{90}dcs\u{9c}Z".as_bytes(), "Z"),
        ("c1 sos pm apc", "\u{98}a\u{9c}\u{9e}b\u{9c}\u{9f}c\u{9c}d".as_bytes(), "d"),
        ("c1 nel removed", "a\u{85}b".as_bytes(), "ab"),
        ("c1 stray st removed", "a\u{9c}b".as_bytes(), "ab"),
        ("c1 inside csi restarts", "\x1b[3\u{9b}1mX".as_bytes(), "X"),
        ("c1 aborts osc", "\x1b]0;t\u{85}X".as_bytes(), "X"),
        ("latin1 in osc swallowed", "\x1b]0;©®\x07ok".as_bytes(), "ok"),
        ("raw 9b byte is invalid utf8", b"a\x9b31m", "a\u{fffd}31m"),
        ("c0 removed", b"a\x00b\x01c\x07d\x08e\x7ff\x0bg\x0ch", "abcdefgh"),
        (
            "format chars removed",
            "a\u{200b}b\u{202e}c\u{2066}d\u{feff}e\u{ad}f\u{e0041}g\u{61c}h\u{180e}i\u{2060}j\u{200d}k\u{2069}l\u{e007f}m"
                .as_bytes(),
            "abcdefghijklm",
        ),
        ("bidi override", "user\u{202e}fdp.exe".as_bytes(), "userfdp.exe"),
        (
            "other unicode kept",
            "héllo 世界 🎉\u{a0}\u{fe0f}\u{301}".as_bytes(),
            "héllo 世界 🎉\u{a0}\u{fe0f}\u{301}",
        ),
        ("invalid byte", b"a\xffb", "a\u{fffd}b"),
        ("truncated at end", b"ok\xe2\x82", "ok\u{fffd}"),
        ("truncated then ascii", b"\xe2\x82A", "\u{fffd}A"),
        ("surrogate", b"\xed\xa0\x80", "\u{fffd}\u{fffd}\u{fffd}"),
        ("overlong", b"\xc0\xaf", "\u{fffd}\u{fffd}"),
        ("truncated 4 byte", b"\xf0\x9f\x98x", "\u{fffd}x"),
        ("too high", b"\xf4\x90\x80\x80", "\u{fffd}\u{fffd}\u{fffd}\u{fffd}"),
        ("lone continuation", b"\x80\x80", "\u{fffd}\u{fffd}"),
        ("multibyte kept", "€ 😀 ü".as_bytes(), "€ 😀 ü"),
        ("fffd inside osc swallowed", b"\x1b]0;\xff\x07x", "x"),
        ("fffd aborts csi", b"\x1b[1\xffm", "\u{fffd}m"),
    ];
    for (name, input, expected) in rows {
        check(name, input, expected);
    }
}

#[test]
fn carriage_returns_never_overwrite() {
    let rows: &[(&str, &[u8], &str)] = &[
        ("the attack", b"safe-looking\rEVIL", "safe-looking\nEVIL"),
        ("crlf", b"a\r\nb\r\n", "a\nb\n"),
        ("bare cr at end", b"progress\r", "progress\n"),
        ("progress bar", b"10%\r50%\r100%\n", "10%\n50%\n100%\n"),
        ("cr cr lf", b"a\r\r\nb", "a\nb"),
        ("lf cr", b"a\n\rb", "a\nb"),
        ("crlf crlf", b"a\r\n\r\nb", "a\n\nb"),
        ("lf lf", b"a\n\nb", "a\n\nb"),
        ("leading cr", b"\rx", "\nx"),
        ("lf then crlf", b"a\n\r\nb", "a\n\nb"),
        ("erase between cr and lf", b"a\r\x1b[K\nb", "a\nb"),
        ("stripped between cr and lf", b"a\r\x00\nb", "a\nb"),
        ("cr inside osc", b"x\x1b]0;t\rEVIL", "x\nEVIL"),
        ("cr inside csi", b"x\x1b[2\rEVIL", "x\nEVIL"),
        ("cr after multibyte", "é\r世".as_bytes(), "é\n世"),
        ("cr after c1", "a\u{85}\rb".as_bytes(), "a\nb"),
    ];
    for (name, input, expected) in rows {
        check(name, input, expected);
        assert!(!run(input).contains('\r'), "{name}");
    }
}

#[test]
fn unterminated_sequences_spare_the_next_lines() {
    // An opener with no terminator, then 1000 lines: every line survives but the first.
    let lines: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    let all_lines = |opener: &[u8]| {
        let mut input = b"before".to_vec();
        input.extend_from_slice(opener);
        input.extend_from_slice(lines.as_bytes());
        run(&input)
    };
    for opener in [
        &b"\x1b["[..],
        b"\x1b[1;2",
        b"\x1b]",
        b"\x1b]0;title",
        b"\x1bP",
        b"\x1b_",
        b"\x1b(",
        "\u{9b}".as_bytes(),
        "\u{9d}".as_bytes(),
    ] {
        let got = all_lines(opener);
        let want = format!("before\n{}", &lines[2..]);
        assert_eq!(got, want, "{opener:?}");
    }
    // On one long line, the bound stops the swallowing: no more than the bound is lost.
    for (opener, bound) in [
        (&b"\x1b]"[..], MAX_STRING_SEQUENCE_BYTES),
        (b"\x1bP", MAX_STRING_SEQUENCE_BYTES),
        (b"\x1b[", MAX_CONTROL_SEQUENCE_BYTES),
    ] {
        let body = "7".repeat(100_000);
        let mut input = opener.to_vec();
        input.extend_from_slice(body.as_bytes());
        let got = run(&input);
        assert_eq!(got.len(), body.len() - bound as usize, "{opener:?}");
    }
    // The bounds docs/security.md states.
    const { assert!(MAX_STRING_SEQUENCE_BYTES <= 4096) };
    const { assert!(MAX_CONTROL_SEQUENCE_BYTES <= 256) };
}

#[test]
fn long_osc_is_abandoned() {
    let mut input = b"\x1b]0;".to_vec();
    // The body starts after `ESC ]`, so "0;" counts towards the bound.
    input.extend(std::iter::repeat_n(
        b'a',
        MAX_STRING_SEQUENCE_BYTES as usize - 2 + 10,
    ));
    input.extend_from_slice(b"tail");
    let expected = format!("{}tail", "a".repeat(10));
    assert_eq!(run(&input), expected);
    for cut in [
        1,
        2,
        3,
        1000,
        input.len() / 2,
        input.len() - 12,
        input.len() - 1,
    ] {
        let (a, b) = input.split_at(cut);
        assert_eq!(run_chunks([a, b]), expected, "split at {cut}");
    }
    assert_eq!(run_chunks(input.chunks(7)), expected);
}

#[test]
fn long_osc_bound_respects_multibyte_chars() {
    let mut input = b"\x1b]".to_vec();
    input.extend(std::iter::repeat_n(
        b'a',
        MAX_STRING_SEQUENCE_BYTES as usize - 1,
    ));
    // A two-byte character straddles the bound: it is swallowed whole, the next one is text.
    input.extend_from_slice("éü".as_bytes());
    assert_eq!(run(&input), "ü");
    assert_eq!(run_chunks(input.chunks(3)), "ü");
}

#[test]
fn long_dcs_is_abandoned() {
    let mut input = b"\x1bP".to_vec();
    input.extend(std::iter::repeat_n(
        b'x',
        MAX_STRING_SEQUENCE_BYTES as usize + 3,
    ));
    assert_eq!(run(&input), "xxx");
}

#[test]
fn long_csi_is_abandoned() {
    let mut input = b"\x1b[".to_vec();
    input.extend(std::iter::repeat_n(
        b'1',
        MAX_CONTROL_SEQUENCE_BYTES as usize + 5,
    ));
    input.push(b'm');
    assert_eq!(run(&input), "11111m");
    assert_eq!(run_chunks(input.chunks(5)), "11111m");
}

#[test]
fn state_is_small() {
    assert!(std::mem::size_of::<Sanitizer>() <= 16);
}

#[test]
fn reusable_after_finish() {
    let mut s = Sanitizer::new();
    let mut out = String::new();
    s.push(b"a\x1b]0;never ends", &mut out);
    s.finish(&mut out);
    s.push(b"b\xe2", &mut out);
    s.finish(&mut out);
    s.push(b"c", &mut out);
    s.finish(&mut out);
    assert_eq!(out, "ab\u{fffd}c");
}

#[test]
fn every_c0_and_c1_removed() {
    for cp in (0u32..0x20).chain(0x7f..0xa0) {
        let c = char::from_u32(cp).unwrap();
        let input = format!("a{c}b");
        let got = run(input.as_bytes());
        match c {
            '\t' | '\n' => assert_eq!(got, input),
            '\r' => assert_eq!(got, "a\nb"),
            // These start or end sequences, swallowing what follows until a terminator.
            '\u{1b}' | '\u{90}' | '\u{98}' | '\u{9b}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => {
                assert!(got.starts_with('a') && !got.contains(c), "{cp:#x}: {got:?}")
            }
            _ => assert_eq!(got, "ab", "{cp:#x}"),
        }
    }
}

/// Splits `data` at the given (sorted, deduplicated) cut points.
fn split_at_points<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(&data[last..p]);
        last = p;
    }
    out.push(&data[last..]);
    out
}

/// Bytes that exercise the state machine far more often than uniform random bytes.
fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => prop::sample::select(vec![
            0x1b, b'[', b']', b'P', b'X', b'^', b'_', b'\\', 0x07, b';', b'?', b'0', b'1', b'm',
            b'(', b'B', b' ', b'a', b'\n', b'\r', b'\t', 0x18, 0x1a, 0x7f, 0xc2, 0x9b, 0x9c, 0x9d,
            0xe2, 0x80, 0x8b, 0xf0, 0x9f, 0xff,
        ]),
        1 => any::<u8>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn chunking_does_not_matter(
        data in prop::collection::vec(interesting_byte(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = run(&data);
        let pieces = split_at_points(&data, &cuts);
        prop_assert_eq!(run_chunks(pieces.iter().copied()), whole.clone());
        prop_assert_eq!(run_chunks(data.chunks(1)), whole);
    }

    #[test]
    fn matches_reference_model(
        data in prop::collection::vec(interesting_byte(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let pieces = split_at_points(&data, &cuts);
        prop_assert_eq!(run_chunks(pieces.iter().copied()), reference(&data));
    }

    #[test]
    fn matches_reference_model_on_text(
        text in "[a-z \t\n\u{1b}\u{7}\u{9b}\u{9c}\u{9d}\u{85}\u{a9}\u{200b}\u{4e16}\u{1f600}\\[\\]PX^_;?0-9()\\\\]{0,300}",
    ) {
        prop_assert_eq!(run(text.as_bytes()), reference(text.as_bytes()));
    }

    #[test]
    fn output_never_contains_removed_chars(data in prop::collection::vec(any::<u8>(), 0..600)) {
        let out = run(&data);
        prop_assert!(!out.chars().any(is_stripped_char), "{:?}", out);
    }

    #[test]
    fn interesting_output_never_contains_removed_chars(
        data in prop::collection::vec(interesting_byte(), 0..600),
    ) {
        let out = run(&data);
        prop_assert!(!out.chars().any(is_stripped_char), "{:?}", out);
    }

    #[test]
    fn matches_lossy_decoding_without_sequences(
        data in prop::collection::vec(
            any::<u8>().prop_map(|b| if matches!(b, 0x1b | 0x18 | 0x1a | 0xc2) { b'x' } else { b }),
            0..600,
        ),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let expected = line_breaks(
            String::from_utf8_lossy(&data)
                .chars()
                .filter(|c| !is_stripped_char(*c)),
        );
        let pieces = split_at_points(&data, &cuts);
        prop_assert_eq!(run_chunks(pieces.iter().copied()), expected);
    }

    #[test]
    fn plain_text_passes_through(text in "[ -~\t\n\r\u{a0}-\u{2fff}]{0,300}") {
        let expected = line_breaks(text.chars().filter(|c| !is_stripped_char(*c)));
        prop_assert_eq!(run(text.as_bytes()), expected);
    }
}

/// The line-break rule on text without sequences, stated as the module docs state it: each
/// run of `\r` and `\n` becomes as many `\n` as it holds, or one if it holds none.
fn line_breaks(text: impl Iterator<Item = char>) -> String {
    let mut out = String::new();
    let mut run = (false, 0usize);
    let close = |run: &mut (bool, usize), out: &mut String| {
        if run.0 {
            out.push_str(&"\n".repeat(run.1.max(1)));
        }
        *run = (false, 0);
    };
    for c in text {
        match c {
            '\r' => run.0 = true,
            '\n' => {
                run.0 = true;
                run.1 += 1;
            }
            c => {
                close(&mut run, &mut out);
                out.push(c);
            }
        }
    }
    close(&mut run, &mut out);
    out
}

/// Parser state of the reference model below.
#[derive(Clone, Copy, PartialEq)]
enum RefState {
    Ground,
    Esc,
    EscInt,
    Csi,
    Osc,
    StrOther,
    StrEsc,
}

/// A deliberately naive, char-at-a-time model of the sanitizer (no fast paths, no streaming),
/// used to check the real one.
fn reference(input: &[u8]) -> String {
    use RefState::*;
    let text = String::from_utf8_lossy(input);
    let mut out = String::new();
    let mut st = Ground;
    let mut n: u32 = 0;
    // What the emitted text ends with: 0 text, 1 a `\r` made `\n`, 2 a `\n`.
    let mut end = 0u8;
    let mut emit = |c: char, out: &mut String| match (c, end) {
        ('\r', 0) => {
            out.push('\n');
            end = 1;
        }
        ('\r', _) => {}
        ('\n', 1) => end = 2,
        ('\n', _) => {
            out.push('\n');
            end = 2;
        }
        (c, _) if is_stripped_char(c) => {}
        (c, _) => {
            out.push(c);
            end = 0;
        }
    };
    let mut chars = text.chars().peekable();
    let mut redo: Option<char> = None;
    while let Some(c) = redo.take().or_else(|| chars.next()) {
        let anywhere = match c {
            '\u{1b}' => Some(if matches!(st, Osc | StrOther) {
                StrEsc
            } else {
                Esc
            }),
            '\u{18}' | '\u{1a}' => Some(Ground),
            '\n' | '\r' => {
                st = Ground;
                n = 0;
                emit(c, &mut out);
                continue;
            }
            '\u{9b}' => Some(Csi),
            '\u{9d}' => Some(Osc),
            '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => Some(StrOther),
            '\u{80}'..='\u{9f}' => Some(Ground),
            _ => None,
        };
        if let Some(next) = anywhere {
            st = next;
            n = 0;
            continue;
        }
        let code = c as u32;
        match st {
            Ground => emit(c, &mut out),
            Esc | EscInt | Csi => {
                let is_param = match st {
                    Esc => false,
                    EscInt => (0x20..=0x2f).contains(&code),
                    _ => (0x20..=0x3f).contains(&code),
                };
                if st == Esc && c == '[' {
                    st = Csi;
                    n = 0;
                } else if st == Esc && c == ']' {
                    st = Osc;
                    n = 0;
                } else if st == Esc && "PX^_".contains(c) {
                    st = StrOther;
                    n = 0;
                } else if st == Esc && (0x20..=0x2f).contains(&code) {
                    st = EscInt;
                    n = 1;
                } else if is_param {
                    if n >= MAX_CONTROL_SEQUENCE_BYTES {
                        st = Ground;
                        n = 0;
                        emit(c, &mut out);
                    } else {
                        n += 1;
                    }
                } else if (st != Csi && (0x30..=0x7e).contains(&code))
                    || (st == Csi && (0x40..=0x7e).contains(&code))
                {
                    st = Ground;
                    n = 0;
                } else if code == 0x7f {
                } else if code < 0x20 {
                    emit(c, &mut out);
                } else {
                    st = Ground;
                    n = 0;
                    emit(c, &mut out);
                }
            }
            Osc | StrOther => {
                if c == '\u{7}' && st == Osc {
                    st = Ground;
                    n = 0;
                } else if n >= MAX_STRING_SEQUENCE_BYTES {
                    st = Ground;
                    n = 0;
                    emit(c, &mut out);
                } else {
                    n += c.len_utf8() as u32;
                }
            }
            StrEsc => {
                if c == '\\' {
                    st = Ground;
                } else {
                    st = Esc;
                    redo = Some(c);
                }
                n = 0;
            }
        }
    }
    out
}

/// Pushes `total` bytes made of `chunk` repeated and returns the best rate of five runs in
/// GB/s (the machine is shared, so single runs are noisy).
fn throughput(chunk: &[u8], total: usize) -> f64 {
    (0..5)
        .map(|_| throughput_once(chunk, total / 5))
        .fold(0.0, f64::max)
}

fn throughput_once(chunk: &[u8], total: usize) -> f64 {
    let mut s = Sanitizer::new();
    let mut out = String::with_capacity(chunk.len() * 2);
    let rounds = total / chunk.len();
    let start = std::time::Instant::now();
    let mut kept = 0usize;
    for _ in 0..rounds {
        out.clear();
        s.push(chunk, &mut out);
        kept += out.len();
    }
    s.finish(&mut out);
    let secs = start.elapsed().as_secs_f64();
    assert!(kept > 0);
    (rounds * chunk.len()) as f64 / secs / 1e9
}

/// Builds a 64 KiB chunk by repeating `line`.
fn chunk_of(line: &str) -> Vec<u8> {
    line.as_bytes()
        .iter()
        .copied()
        .cycle()
        .take(64 * 1024)
        .collect()
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn sanitize_throughput() {
    let total = 1 << 30;
    let ascii = chunk_of("The quick brown fox jumps over the lazy dog; 0123456789 {}[]()!\n");
    let colored = chunk_of("\x1b[1;32m   Compiling\x1b[0m moat v0.1.0 (/work/main)\x1b[K\n");
    let utf8 = chunk_of("Grüße, 世界! Ünïcödé téxt wïth äccents — and “quotes”.\n");
    println!("sanitize ascii:   {:.2} GB/s", throughput(&ascii, total));
    println!(
        "sanitize colored: {:.2} GB/s",
        throughput(&colored, total / 4)
    );
    println!("sanitize utf8:    {:.2} GB/s", throughput(&utf8, total / 4));
}
