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
