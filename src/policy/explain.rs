//! Rendering an evaluation for people (`moat policy explain`) and for programs (`--json`).

use serde::Serialize;
use serde_json::Value;

use super::plan::Plan;
use super::verdict::{Evaluation, SegmentReport};
use crate::output::{display_argv, escape_display};

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
