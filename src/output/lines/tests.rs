//! Tests of the line pager.

use super::*;
use proptest::prelude::*;

/// `n` lines "1".."n", each ending with a newline.
fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

fn numbered_range(from: usize, to: usize) -> String {
    (from..=to)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn table() {
    let n250 = numbered(250);
    let n50 = numbered(50);
    let last200 = numbered_range(51, 250);
    let first200_from_10 = numbered_range(11, 210);
    type Row<'a> = (
        &'a str,
        &'a str,
        Option<usize>,
        Option<usize>,
        &'a str,
        usize,
        usize,
        usize,
        Option<&'a str>,
    );
    let rows: &[Row] = &[
        ("empty", "", None, None, "", 0, 0, 0, None),
        ("one line no newline", "a", None, None, "a", 1, 0, 1, None),
        ("one line newline", "a\n", None, None, "a", 1, 0, 1, None),
        ("lone newline", "\n", None, None, "", 1, 0, 1, None),
        (
            "blank lines kept",
            "a\n\nb\n\n",
            None,
            None,
            "a\n\nb\n",
            4,
            0,
            4,
            None,
        ),
        ("crlf", "a\r\nb\r\n", None, None, "a\nb", 2, 0, 2, None),
        (
            "bare cr kept inside",
            "50%\r100%\nok",
            None,
            None,
            "50%\r100%\nok",
            2,
            0,
            2,
            None,
        ),
        (
            "few lines",
            &n50,
            None,
            None,
            n50.trim_end(),
            50,
            0,
            50,
            None,
        ),
        (
            "default tail",
            &n250,
            None,
            None,
            &last200,
            250,
            50,
            250,
            Some("showing last 200 of 250 lines; pass offset/limit to page"),
        ),
        (
            "limit only",
            &n250,
            None,
            Some(3),
            "248\n249\n250",
            250,
            247,
            250,
            None,
        ),
        ("limit zero", &n250, None, Some(0), "", 250, 250, 250, None),
        (
            "limit over total",
            "a\nb\n",
            None,
            Some(10),
            "a\nb",
            2,
            0,
            2,
            None,
        ),
        (
            "offset and limit",
            &n250,
            Some(0),
            Some(2),
            "1\n2",
            250,
            0,
            2,
            None,
        ),
        (
            "offset middle",
            &n250,
            Some(9),
            Some(3),
            "10\n11\n12",
            250,
            9,
            12,
            None,
        ),
        (
            "offset to end",
            &n250,
            Some(248),
            Some(10),
            "249\n250",
            250,
            248,
            250,
            None,
        ),
        (
            "offset past end",
            &n250,
            Some(400),
            Some(10),
            "",
            250,
            250,
            250,
            None,
        ),
        (
            "offset default limit",
            &n250,
            Some(10),
            None,
            &first200_from_10,
            250,
            10,
            210,
            Some("showing lines 11-210 of 250; pass offset/limit to page"),
        ),
        (
            "offset default limit reaches end",
            &n250,
            Some(100),
            None,
            &numbered_range(101, 250),
            250,
            100,
            250,
            None,
        ),
        (
            "offset last line",
            "a\nb\nc",
            Some(2),
            None,
            "c",
            3,
            2,
            3,
            None,
        ),
        (
            "unicode",
            "ä\n€\n😀\n",
            Some(1),
            Some(1),
            "€",
            3,
            1,
            2,
            None,
        ),
    ];
    for (name, text, offset, limit, expected, total, start, end, note) in rows {
        let p = page(text, *offset, *limit);
        assert_eq!(p.text, *expected, "{name}: text");
        assert_eq!(p.total_lines, *total, "{name}: total");
        assert_eq!((p.start, p.end), (*start, *end), "{name}: range");
        assert_eq!(p.note.as_deref(), *note, "{name}: note");
    }
}

#[test]
fn render_appends_note() {
    let p = page(&numbered(201), None, None);
    assert!(p
        .render()
        .ends_with("201\n\n[showing last 200 of 201 lines; pass offset/limit to page]"));
    assert_eq!(page("a\nb", None, None).render(), "a\nb");
}

proptest! {
    #[test]
    fn matches_reference(
        lines in prop::collection::vec("[a-z ]{0,5}", 0..30),
        trailing in any::<bool>(),
        offset in prop::option::of(0usize..40),
        limit in prop::option::of(0usize..40),
    ) {
        let mut text = lines.join("\n");
        if trailing && !lines.is_empty() {
            text.push('\n');
        }
        let all: Vec<&str> = if text.is_empty() {
            Vec::new()
        } else {
            text.strip_suffix('\n').unwrap_or(&text).split('\n').collect()
        };
        let p = page(&text, offset, limit);
        prop_assert_eq!(p.total_lines, all.len());
        prop_assert!(p.start <= p.end && p.end <= all.len());
        prop_assert_eq!(p.text, all[p.start..p.end].join("\n"));
        if let Some(o) = offset {
            prop_assert_eq!(p.start, o.min(all.len()));
            prop_assert_eq!(p.end - p.start, limit.unwrap_or(200).min(all.len() - p.start));
        } else {
            prop_assert_eq!(p.end, all.len());
        }
    }
}

#[test]
fn line_window_table() {
    // (first, last, offset, limit) -> [start, end)
    type Ask = (u64, u64, Option<u64>, Option<u64>);
    let rows: &[(Ask, (u64, u64))] = &[
        ((1, 0, None, None), (1, 1)),
        ((1, 10, None, None), (1, 11)),
        ((1, 500, None, None), (301, 501)),
        ((1, 500, None, Some(5)), (496, 501)),
        ((1, 100_000, Some(4222), Some(5)), (4222, 4227)),
        ((1, 100_000, Some(0), Some(2)), (1, 3)),
        ((1, 100_000, Some(1), Some(2)), (1, 3)),
        ((1, 10, Some(8), Some(5)), (8, 11)),
        ((1, 10, Some(11), Some(5)), (11, 11)),
        ((1, 10, Some(50), None), (11, 11)),
        // The record was cut: lines before `first` are gone.
        ((700, 1000, Some(10), Some(5)), (700, 705)),
        ((700, 1000, None, Some(5000)), (700, 1001)),
        ((700, 1000, Some(990), None), (990, 1001)),
    ];
    for ((first, last, offset, limit), want) in rows {
        assert_eq!(
            line_window(*first, *last, *offset, *limit),
            *want,
            "{first} {last} {offset:?} {limit:?}"
        );
    }
}

#[test]
fn collector_table() {
    // (chunks, first line of the stream, from, to, budget) -> (text, cut)
    type Row<'a> = (&'a [&'a str], u64, u64, u64, usize, &'a str, bool);
    let rows: &[Row] = &[
        (&["1\n2\n3\n"], 1, 1, 4, 100, "1\n2\n3", false),
        (&["1\n2\n3\n"], 1, 2, 3, 100, "2", false),
        (&["1\n", "2", "\n3"], 1, 2, 4, 100, "2\n3", false),
        (&["a\r\nb\r\n"], 1, 1, 3, 100, "a\nb", false),
        (&["x\r\ny"], 1, 1, 3, 100, "x\ny", false),
        (&["7\n8\n9\n"], 7, 8, 10, 100, "8\n9", false),
        (&["7\n8\n9\n"], 7, 1, 3, 100, "", false),
        (&["aaaa\nbbbb\n"], 1, 1, 3, 6, "aaaa\nb", true),
        (&["\u{e9}\u{e9}\n"], 1, 1, 2, 3, "\u{e9}", true),
    ];
    for (chunks, first, from, to, budget, want, want_cut) in rows {
        let mut c = LineCollector::new(*first, *from, *to, *budget);
        for chunk in *chunks {
            c.push(chunk);
        }
        assert_eq!(c.finish(), (want.to_string(), *want_cut), "{chunks:?}");
    }
}

#[test]
fn counter_table() {
    let rows: &[(&[&str], u64)] = &[
        (&[], 0),
        (&[""], 0),
        (&["a"], 1),
        (&["a\n"], 1),
        (&["a\n", "b"], 2),
        (&["a", "\n", "b\n"], 2),
        (&["\n\n"], 2),
    ];
    for (chunks, want) in rows {
        let mut c = LineCounter::default();
        for chunk in *chunks {
            c.push(chunk);
        }
        assert_eq!(c.lines(), *want, "{chunks:?}");
    }
}
