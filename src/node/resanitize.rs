//! A node's answers and events are another machine's text (docs/nodes.md, "What crosses"):
//! every text in them goes through this moat's own sanitizer before any edge shows it,
//! whatever the node already did to it.

use crate::contract::ToolResult;

/// Every text of a node's result through this moat's sanitizer: the node's output is
/// another machine's, whatever that machine already did to it.
pub fn resanitized(mut result: ToolResult) -> ToolResult {
    for c in &mut result.content {
        c.text = sanitized(&c.text);
    }
    // Every text of the details too (status, command, cwd, aggregated output, ids): they
    // reach the same edges.
    if let Ok(mut v) = serde_json::to_value(&result.details) {
        clean_strings(&mut v);
        if let Ok(d) = serde_json::from_value(v) {
            result.details = d;
        }
    }
    result
}

fn sanitized(text: &str) -> String {
    let mut s = crate::output::Sanitizer::new();
    let mut out = String::with_capacity(text.len());
    s.push(text.as_bytes(), &mut out);
    s.finish(&mut out);
    out
}

fn clean_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => *s = sanitized(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(clean_strings),
        serde_json::Value::Object(o) => o.values_mut().for_each(clean_strings),
        _ => {}
    }
}

/// One text of a node's (an event's sentence): sanitized and cut to `max` characters.
pub fn resanitized_text(text: &str, max: usize) -> String {
    sanitized(&text.chars().take(max).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Details;

    /// The details' texts too: a hostile node's status, cwd or output in `details`.
    #[test]
    fn a_nodes_details_are_sanitized_again() {
        let raw: ToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "hello"}],
            "details": {"status": "x\u{1b}]0;PWNED\u{7}\u{1b}[31mRED\u{1b}[0m", "cwd": "/w\u{1b}[2J"},
        }))
        .unwrap();
        let clean = serde_json::to_string(&resanitized(raw).details).unwrap();
        assert!(
            !clean.contains("\\u001b") && !clean.contains("\\u0007"),
            "{clean}"
        );
    }

    /// A node's text is sanitized here again: escape sequences and control characters a
    /// hostile node left in never reach the gateway's edges.
    #[test]
    fn a_nodes_text_is_sanitized_again() {
        let raw: ToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "ok\u{1b}]0;owned\u{7}\u{1b}[2Jdone\u{0}"}],
            "details": {"status": "completed", "sessions": []},
        }))
        .unwrap();
        assert!(matches!(raw.details, Details::ProcessList(_)));
        let clean = resanitized(raw);
        let text = &clean.content[0].text;
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\0'),
            "{text:?}"
        );
        assert!(text.contains("ok") && text.contains("done"), "{text:?}");
    }
}
