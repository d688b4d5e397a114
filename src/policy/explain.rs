//! Rendering an evaluation for people (`moat policy explain`) and for programs (`--json`).

use serde::Serialize;
use serde_json::Value;

use super::plan::{quote, Plan};
use super::verdict::{Evaluation, SegmentReport};

/// Whether a character would hide or disguise text on a terminal: controls, bidi overrides,
/// zero-width and other invisible or look-alike spacing characters.
pub fn is_deceptive(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00A0 | 0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5
            | 0x180B..=0x180F | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x206F
            | 0x3000 | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB
            | 0xE0000..=0xE007F)
}

/// Escapes control, bidi and invisible characters so displayed text shows what is really there.
pub fn escape_display(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_deceptive(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// An argv as a shell-like line, quoting only words that need it, escaped for display.
pub fn display_argv(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|word| match shlex::try_quote(word) {
            Ok(quoted) => quoted.into_owned(),
            Err(_) => quote(word),
        })
        .collect();
    escape_display(&words.join(" "))
}

/// The human-readable explanation.
pub fn explain_text(eval: &Evaluation) -> String {
    let mut out = String::new();
    out.push_str(&format!("decision: {}\n", eval.decision.as_str()));
    if let Some(reason) = eval.decision.reason() {
        out.push_str(&format!("reason: {}\n", escape_display(reason)));
    }
    if eval.segments.is_empty() {
        out.push_str("segments: none\n");
    } else {
        out.push_str("segments:\n");
        for segment in &eval.segments {
            push_segment(&mut out, segment);
        }
    }
    match &eval.plan {
        None => out.push_str("plan: none\n"),
        Some(plan) => push_plan(&mut out, plan),
    }
    out
}

fn push_segment(out: &mut String, segment: &SegmentReport) {
    let outcome = serde_json::to_value(segment.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    out.push_str(&format!(
        "  {}. {}\n",
        segment.index,
        escape_display(&segment.raw)
    ));
    out.push_str(&format!("     argv: {}\n", display_argv(&segment.argv)));
    let resolved = segment
        .resolved
        .as_deref()
        .map_or_else(|| "-".to_owned(), escape_display);
    out.push_str(&format!("     resolved: {resolved}\n"));
    out.push_str(&format!(
        "     outcome: {outcome} ({})\n",
        escape_display(&segment.rule)
    ));
}

fn push_plan(out: &mut String, plan: &Plan) {
    let kind = if plan.rebuilt {
        "rebuilt"
    } else {
        "original text"
    };
    out.push_str(&format!("plan ({kind}):\n"));
    for line in plan.command.split('\n') {
        out.push_str(&format!("  {}\n", escape_display(line)));
    }
}

/// The JSON shape of an explanation; documented in POLICY.md.
#[derive(Serialize)]
struct ExplainJson<'a> {
    /// A flat string rather than the tagged enum, so scripts can compare it directly.
    decision: &'static str,
    /// Always present (null on allow) so consumers need not probe for the key.
    reason: Option<&'a str>,
    /// The per-segment verdicts that led to the decision.
    segments: &'a [SegmentReport],
    /// What would run; null when refused.
    plan: Option<&'a Plan>,
}

/// The machine-readable explanation: `decision`, `reason`, `segments`, `plan`.
pub fn explain_json(eval: &Evaluation) -> Value {
    let shape = ExplainJson {
        decision: eval.decision.as_str(),
        reason: eval.decision.reason(),
        segments: &eval.segments,
        plan: eval.plan.as_ref(),
    };
    serde_json::to_value(shape).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_display_table() {
        let rows = [
            ("ls -la", "ls -la"),
            ("a\nb", "a\\nb"),
            ("a\rb", "a\\rb"),
            ("\u{1b}[31m", "\\u{001b}[31m"),
            ("ls\u{a0}-la", "ls\\u{00a0}-la"),
            ("a\u{202e}b", "a\\u{202e}b"),
            ("zero\u{200b}width", "zero\\u{200b}width"),
            ("caf\u{e9}", "caf\u{e9}"),
            ("\u{feff}x", "\\u{feff}x"),
        ];
        for (input, want) in rows {
            assert_eq!(escape_display(input), want, "input {input:?}");
        }
    }

    #[test]
    fn display_argv_quotes_only_when_needed() {
        let argv: Vec<String> = ["ls", "a b", "it's", "", "x\ny"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(display_argv(&argv), "ls 'a b' \"it's\" '' 'x\\ny'");
    }
}
