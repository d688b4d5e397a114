//! Tests of the `apply_patch` envelope: parsing and applying hunks.

use std::collections::BTreeMap;

use super::*;

type Files = &'static [(&'static str, &'static str)];
/// Changed files after a patch: path → new text, `None` for deleted.
type Changes = Vec<(&'static str, Option<&'static str>)>;

fn state(files: Files) -> BTreeMap<String, Option<String>> {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), Some(t.to_string())))
        .collect()
}

/// Runs a patch against `before` the way the shell does: every path it names is looked up
/// (missing ones as `None`), then the changed files come back.
fn run(patch: &str, before: Files) -> Result<BTreeMap<String, Option<String>>, PatchError> {
    let p = parse(patch)?;
    let known = state(before);
    let current = p
        .paths()
        .into_iter()
        .map(|path| {
            let v = known.get(&path).cloned().flatten();
            (path, v)
        })
        .collect();
    p.apply(&current)
}

const FN_FILE: &str = "fn a() {\n    x();\n}\n\nfn b() {\n    x();\n}\n";

#[test]
fn patches_that_apply() {
    // (what, patch, files before, changed files after: None = deleted)
    let rows: Vec<(&str, &str, Files, Changes)> = vec![
        (
            "add",
            "*** Begin Patch\n*** Add File: new.txt\n+hello\n+\n+world\n*** End Patch\n",
            &[],
            vec![("new.txt", Some("hello\n\nworld\n"))],
        ),
        (
            "add with blank separator lines and indented markers",
            "\n  *** Begin Patch\n*** Add File: a\n+1\n\n*** Add File: b\n+2\n  *** End Patch  \n\n",
            &[],
            vec![("a", Some("1\n")), ("b", Some("2\n"))],
        ),
        (
            "update with two hunks",
            "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+B\n c\n@@\n x\n-y\n+Y\n+Y2\n z\n*** End Patch",
            &[("f", "a\nb\nc\nd\nx\ny\nz\n")],
            vec![("f", Some("a\nB\nc\nd\nx\nY\nY2\nz\n"))],
        ),
        (
            "first hunk without @@",
            "*** Begin Patch\n*** Update File: f\n a\n-b\n+c\n*** End Patch",
            &[("f", "a\nb\n")],
            vec![("f", Some("a\nc\n"))],
        ),
        (
            "hint picks the second of two identical contexts",
            "*** Begin Patch\n*** Update File: f.rs\n@@ fn b() {\n-    x();\n+    y();\n*** End Patch",
            &[("f.rs", FN_FILE)],
            vec![(
                "f.rs",
                Some("fn a() {\n    x();\n}\n\nfn b() {\n    y();\n}\n"),
            )],
        ),
        (
            "stacked hints",
            "*** Begin Patch\n*** Update File: f\n@@ class B\n@@ def m\n-  v = 1\n+  v = 2\n*** End Patch",
            &[(
                "f",
                "class A\n def m\n  v = 1\nclass B\n def m\n  v = 1\n",
            )],
            vec![(
                "f",
                Some("class A\n def m\n  v = 1\nclass B\n def m\n  v = 2\n"),
            )],
        ),
        (
            "unified-diff style @@ with line numbers is not a hint",
            "*** Begin Patch\n*** Update File: f\n@@ -1,2 +1,2 @@\n-a\n+b\n*** End Patch",
            &[("f", "a\n")],
            vec![("f", Some("b\n"))],
        ),
        (
            "trailing whitespace tolerated",
            "*** Begin Patch\n*** Update File: f\n@@\n keep\n-old\n+new\n*** End Patch",
            &[("f", "keep   \nold\t\n")],
            vec![("f", Some("keep   \nnew\n"))],
        ),
        (
            "leading and trailing whitespace tolerated",
            "*** Begin Patch\n*** Update File: f\n@@\n keep\n-old\n+new\n*** End Patch",
            &[("f", "    keep\n  old  \n")],
            vec![("f", Some("    keep\nnew\n"))],
        ),
        (
            "end of file anchors at the last occurrence",
            "*** Begin Patch\n*** Update File: f\n@@\n x\n+end\n*** End of File\n*** End Patch",
            &[("f", "x\nmid\nx\n")],
            vec![("f", Some("x\nmid\nx\nend\n"))],
        ),
        (
            "pure addition goes to the end",
            "*** Begin Patch\n*** Update File: f\n@@\n+tail\n*** End Patch",
            &[("f", "a\n")],
            vec![("f", Some("a\ntail\n"))],
        ),
        (
            "delete",
            "*** Begin Patch\n*** Delete File: gone\n*** End Patch",
            &[("gone", "x\n")],
            vec![("gone", None)],
        ),
        (
            "move with an edit",
            "*** Begin Patch\n*** Update File: old.rs\n*** Move to: src/new.rs\n@@\n-a\n+b\n*** End Patch",
            &[("old.rs", "a\n")],
            vec![("old.rs", None), ("src/new.rs", Some("b\n"))],
        ),
        (
            "move without hunks",
            "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
            &[("a", "x\n")],
            vec![("a", None), ("b", Some("x\n"))],
        ),
        (
            "second update of the same file sees the first",
            "*** Begin Patch\n*** Update File: f\n@@\n-1\n+2\n*** Update File: f\n@@\n-2\n+3\n*** End Patch",
            &[("f", "1\n")],
            vec![("f", Some("3\n"))],
        ),
        (
            "crlf file keeps crlf",
            "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+c\n*** End Patch",
            &[("f", "a\r\nb\r\n")],
            vec![("f", Some("a\r\nc\r\n"))],
        ),
        (
            "no final newline stays without one",
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch",
            &[("f", "a")],
            vec![("f", Some("b"))],
        ),
        (
            "trailing empty context stands for the final newline",
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n \n*** End Patch",
            &[("f", "a\n")],
            vec![("f", Some("b\n"))],
        ),
        (
            "empty line without its space is context",
            "*** Begin Patch\n*** Update File: f\n@@\n a\n\n-b\n+c\n*** End Patch",
            &[("f", "a\n\nb\n")],
            vec![("f", Some("a\n\nc\n"))],
        ),
        (
            "add then update in one patch",
            "*** Begin Patch\n*** Add File: n\n+1\n*** Update File: n\n@@\n-1\n+2\n*** End Patch",
            &[],
            vec![("n", Some("2\n"))],
        ),
    ];
    for (what, patch, before, want) in rows {
        let got = run(patch, before).unwrap_or_else(|e| panic!("{what}: {e}"));
        let want: BTreeMap<String, Option<String>> = want
            .into_iter()
            .map(|(p, t)| (p.to_string(), t.map(str::to_string)))
            .collect();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn patches_that_fail_name_the_place() {
    // (what, patch, files before, words the error must contain)
    let rows: Vec<(&str, &str, Files, &[&str])> = vec![
        ("empty", "", &[], &["line 1", "empty"]),
        (
            "no begin",
            "*** Update File: f\n-a\n*** End Patch",
            &[],
            &["line 1", "*** Begin Patch"],
        ),
        (
            "no end",
            "*** Begin Patch\n*** Delete File: f\n",
            &[],
            &["line 2", "*** End Patch"],
        ),
        (
            "no operations",
            "*** Begin Patch\n*** End Patch",
            &[],
            &["no file operations"],
        ),
        (
            "unknown operation",
            "*** Begin Patch\n*** Rename File: a\n*** End Patch",
            &[],
            &["line 2", "expected *** Add File:"],
        ),
        (
            "add line without +",
            "*** Begin Patch\n*** Add File: a\n+ok\nbad\n*** End Patch",
            &[],
            &["line 4", "start with +"],
        ),
        (
            "update without hunks",
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            &[],
            &["line 2", "at least one hunk"],
        ),
        (
            "hunk line with a bad prefix",
            "*** Begin Patch\n*** Update File: a\n@@\n a\n~b\n*** End Patch",
            &[],
            &["line 5", "space, - or +"],
        ),
        (
            "empty hunk",
            "*** Begin Patch\n*** Update File: a\n@@\n@@\n*** End Patch",
            &[],
            &["hunk 1 has no lines"],
        ),
        (
            "path missing",
            "*** Begin Patch\n*** Delete File:   \n*** End Patch",
            &[],
            &["line 2", "no path"],
        ),
        (
            "second hunk does not match",
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n@@\n-nope\n+x\n*** End Patch",
            &[("f", "a\nb\n")],
            &["hunk 2", "f", "`nope`", "not found", "unchanged"],
        ),
        (
            "hint not found",
            "*** Begin Patch\n*** Update File: f\n@@ fn missing()\n-a\n+b\n*** End Patch",
            &[("f", "a\n")],
            &["hunk 1", "`fn missing()`"],
        ),
        (
            "hunks out of order",
            "*** Begin Patch\n*** Update File: f\n@@\n-b\n+B\n@@\n-a\n+A\n*** End Patch",
            &[("f", "a\nb\n")],
            &["hunk 2", "after the previous hunk"],
        ),
        (
            "end of file anchor that is not at the end",
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End of File\n*** End Patch",
            &[("f", "a\nz\n")],
            &["hunk 1", "at the end of the file"],
        ),
        (
            "update of a missing file",
            "*** Begin Patch\n*** Update File: nope\n@@\n-a\n*** End Patch",
            &[],
            &["nope", "no such file to update"],
        ),
        (
            "delete of a missing file",
            "*** Begin Patch\n*** Delete File: nope\n*** End Patch",
            &[],
            &["nope", "no such file to delete"],
        ),
        (
            "add over an existing file",
            "*** Begin Patch\n*** Add File: f\n+x\n*** End Patch",
            &[("f", "y\n")],
            &["f", "already exists"],
        ),
        (
            "move onto an existing file",
            "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
            &[("a", "1\n"), ("b", "2\n")],
            &["b", "already exists"],
        ),
        (
            "escaped control characters in the error",
            "*** Begin Patch\n*** Update File: f\n@@\n-\u{1b}[2J\u{202e}\n*** End Patch",
            &[("f", "a\n")],
            &["hunk 1", "\\u{001b}"],
        ),
    ];
    for (what, patch, before, words) in rows {
        let err = run(patch, before).expect_err(what).to_string();
        for w in words {
            assert!(err.contains(w), "{what}: {err:?} lacks {w:?}");
        }
        assert!(
            !err.chars().any(crate::output::is_deceptive),
            "{what}: raw control character in {err:?}"
        );
    }
}

#[test]
fn paths_are_listed_once_in_order() {
    let p = parse(
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** Delete File: c\n*** Update File: a\n@@\n-x\n*** End Patch",
    )
    .unwrap();
    assert_eq!(p.paths(), ["a", "b", "c"]);
}
