//! The engine: `evaluate(command, policy) → allow(plan) | ask(reason) | deny(reason)`.
//!
//! Whole-command gates come first (security `deny`, `allowed_workdirs`, `/approve`). Then each
//! segment is judged and the verdicts are combined: any denial refuses the command; any miss
//! asks (or refuses when `ask` is off); an otherwise covered command still asks for inline eval,
//! ask patterns, or `ask = always`.

use super::allowlist::{Allowlist, Candidate};
use super::analysis::{analyse, Parsed};
use super::command_words::with_time_keyword;
use super::env;
use super::git;
use super::inline_eval;
use super::ir::{Redirect, Segment};
use super::known_safe;
use super::levels::{Ask, Security};
use super::paths::basename;
use super::patterns::PatternSet;
use super::plan::{render, Plan, PlannedSegment};
use super::probe::Probes;
use super::resolve::{check_trusted, resolve_word, Resolver};
use super::safe_bins;
use super::settings::Policy;
use super::verdict::{Decision, Evaluation, Request, SegmentOutcome, SegmentReport};
use super::workdir;
use super::wrappers::{
    is_code_builtin, pattern_layers, runs_other_programs, unwrap, UnwrapError, WrapperUse,
    PRIVILEGE_WRAPPERS,
};
use crate::output::{display_argv, escape_display};

/// The refusal for commands that would run `/approve`.
const APPROVE_REASON: &str =
    "exec cannot run /approve commands; show the /approve command to the operator instead";

/// The compiled policy for one evaluation.
struct Context<'a> {
    /// The operator's settings, for the dials and the trusted directories.
    policy: &'a Policy,
    /// The working directory, against which relative program paths are judged.
    cwd: &'a str,
    /// The request's variables, judged under an allowlist (docs/policy.md, "Request env").
    env: &'a std::collections::BTreeMap<String, String>,
    /// The caller's PATH lookups; the engine itself never searches PATH.
    resolver: &'a dyn Resolver,
    /// The allowlist, compiled once per evaluation rather than once per segment.
    allowlist: Allowlist,
    /// Deny patterns, compiled once.
    deny: PatternSet,
    /// Ask patterns, compiled once.
    ask: PatternSet,
}

/// One judged segment.
struct Checked {
    /// What explain shows for the segment.
    report: SegmentReport,
    /// The rebuilt segment, present only when the segment passed (possibly needing approval),
    /// so that nothing unchecked can reach a plan.
    planned: Option<PlannedSegment>,
}

/// Judges a command against a policy. Pure: no I/O, never panics, never fails. Parses the
/// command itself; callers that also need the names to resolve parse once with
/// [`analyse`](super::analyse) and call [`evaluate_parsed`].
pub fn evaluate(req: &Request<'_>, policy: &Policy, resolver: &dyn Resolver) -> Evaluation {
    evaluate_parsed(&analyse(req.command), req, policy, resolver)
}

/// Judges a parsed command against a policy; `req` gives its working directory and request env
/// (`req.command` is not parsed again). A command past the parsing bounds is refused in every
/// mode (docs/security.md, "Command parsing bounds").
pub fn evaluate_parsed(
    parsed: &Parsed,
    req: &Request<'_>,
    policy: &Policy,
    resolver: &dyn Resolver,
) -> Evaluation {
    if policy.security == Security::Deny {
        return Evaluation::refused("security is deny");
    }
    if let Some(why) = parsed.refusal() {
        return Evaluation::refused(why.to_string());
    }
    if let Err(reason) = workdir::check(req.cwd, &policy.allowed_workdirs) {
        return Evaluation::refused(escape_display(&reason));
    }
    let probes = &parsed.probes;
    if mentions_approve(parsed.command(), probes) {
        return Evaluation::refused(APPROVE_REASON);
    }
    let ctx = Context {
        policy,
        cwd: req.cwd,
        env: req.env,
        resolver,
        allowlist: Allowlist::compile_lenient(&policy.allowlist)
            .with_labeled(&policy.labeled_allowlist),
        deny: PatternSet::compile_lenient(&policy.deny_patterns),
        ask: PatternSet::compile_lenient(&policy.ask_patterns),
    };
    match policy.security {
        Security::Full => evaluate_full(parsed, &ctx, probes),
        Security::Allowlist | Security::Deny => evaluate_allowlist(parsed, &ctx, probes),
    }
}

/// Bare command names a caller should resolve through PATH before calling [`evaluate`]:
/// every segment's command word and the commands its wrappers run. Best effort; never panics.
pub fn command_names(command: &str) -> Vec<String> {
    analyse(command).command_names()
}

/// Every command word a caller should resolve (PATH hit and symlink target) so that argv
/// patterns see what really runs: the command word of every reachable command and of the
/// commands its wrappers run, bare names and paths alike. Best effort; never panics.
pub fn pattern_words(parsed: &Parsed) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for argv in &parsed.probes.argvs {
        for layer in pattern_layers(argv) {
            let first = &layer[0];
            let literal = !first.is_empty()
                && !first.contains(['$', '`', '\'', '"', '\n', '\t', ' '])
                && !is_code_builtin(first);
            if literal && !words.contains(first) {
                words.push(first.clone());
            }
        }
    }
    words
}

/// Program paths an interpreter in the command would read (`python3 x.py` → `./x.py`), which a
/// caller should resolve through symlinks like command words: a script that links to
/// `/dev/stdin` reads stdin. Best effort; never panics.
pub fn source_words(parsed: &Parsed) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for segment in &parsed.script.segments {
        let Ok(unwrapped) = unwrap(&with_time_keyword(segment)) else {
            continue;
        };
        if let Some(path) = inline_eval::program_path(&unwrapped.inner) {
            if !words.contains(&path) && !path.contains(['\n', '\t']) {
                words.push(path);
            }
        }
    }
    words
}

/// Whether any line or any reachable command would run `/approve`.
fn mentions_approve(command: &str, probes: &Probes) -> bool {
    let is_approve = |word: &str| {
        let lower = word.trim_start().to_ascii_lowercase();
        lower == "/approve" || lower.starts_with("/approve@")
    };
    let line_starts = |line: &str| {
        line.trim_start()
            .to_ascii_lowercase()
            .starts_with("/approve")
    };
    command.lines().any(line_starts)
        || probes
            .argvs
            .iter()
            .flat_map(|argv| pattern_layers(argv))
            .any(|layer| is_approve(&layer[0]))
}

/// The first pattern of `set` matching an argv or a command it runs through wrappers.
fn pattern_hit<'s>(set: &'s PatternSet, argv: &[String], ctx: &Context<'_>) -> Option<&'s str> {
    let also = |word: &str| {
        let mut names = Vec::new();
        if !word.contains('/') {
            names.extend(ctx.resolver.resolve(word));
        }
        names.extend(ctx.resolver.real(word));
        names
    };
    set.find(&pattern_layers(argv), &also)
}

/// The first deny or ask pattern matching any reachable command, with the command shown.
fn probe_match(set: &PatternSet, probes: &Probes, ctx: &Context<'_>) -> Option<String> {
    probes.argvs.iter().find_map(|argv| {
        pattern_hit(set, argv, ctx)
            .map(|pattern| format!("pattern {pattern:?} matches `{}`", display_argv(argv)))
    })
}

/// Full mode: everything runs as written, except what the patterns catch.
fn evaluate_full(parsed: &Parsed, ctx: &Context<'_>, probes: &Probes) -> Evaluation {
    let script = &parsed.script;
    let mut segments = Vec::new();
    for (position, segment) in script.segments.iter().enumerate() {
        let argv = with_time_keyword(segment);
        let resolved = unwrap(&argv)
            .ok()
            .and_then(|u| u.inner.first().cloned())
            .and_then(|word| resolve_word(&word, ctx.resolver, &ctx.policy.trusted_dirs).ok())
            .map(|r| r.path);
        let (outcome, rule) = if let Some(pattern) = pattern_hit(&ctx.deny, &argv, ctx) {
            (SegmentOutcome::Denied, format!("deny-pattern: {pattern}"))
        } else if let Some(pattern) = pattern_hit(&ctx.ask, &argv, ctx) {
            (SegmentOutcome::Ask, format!("ask-pattern: {pattern}"))
        } else {
            (SegmentOutcome::Allowed, "security: full".to_owned())
        };
        segments.push(SegmentReport {
            index: position + 1,
            raw: segment.raw.clone(),
            argv: segment.argv.clone(),
            resolved,
            outcome,
            rule,
            inline_eval: None,
        });
    }
    let original = Plan {
        command: parsed.command().to_owned(),
        rebuilt: false,
        segments: Vec::new(),
    };
    let patterns_configured = !ctx.deny.is_empty() || !ctx.ask.is_empty();
    let mut opaque = probes.opaque.clone();
    if patterns_configured {
        opaque.extend(unresolved_words(probes, ctx));
    }
    let decision = if let Some(reason) = segment_reason(&segments, SegmentOutcome::Denied)
        .or_else(|| probe_match(&ctx.deny, probes, ctx).map(|m| format!("deny {m}")))
    {
        Decision::Deny { reason }
    } else if let Some(reason) = segment_reason(&segments, SegmentOutcome::Ask)
        .or_else(|| probe_match(&ctx.ask, probes, ctx).map(|m| format!("ask {m}")))
    {
        Decision::Ask { reason }
    } else if patterns_configured && !opaque.is_empty() {
        // A miss in full mode: what the patterns cannot see is asked, or refused when nobody
        // is asked (docs/policy.md, "Full mode").
        let reason = format!(
            "argv patterns cannot see into this command ({})",
            escape_display(&opaque.join(", "))
        );
        if ctx.policy.ask == Ask::Off {
            Decision::Deny { reason }
        } else {
            Decision::Ask { reason }
        }
    } else if ctx.policy.ask == Ask::Always {
        Decision::Ask {
            reason: "ask is always".to_owned(),
        }
    } else {
        Decision::Allow
    };
    let plan = match decision {
        Decision::Deny { .. } => None,
        Decision::Allow | Decision::Ask { .. } => Some(original),
    };
    Evaluation {
        decision,
        segments,
        plan,
        inline_eval: Vec::new(),
    }
}

/// Shell builtins that exist without a file, so resolving them finds nothing.
const FILELESS_BUILTINS: &[&str] = &[
    ":", "[", "[[", "type", "command", "wait", "echo", "printf", "test", "true", "false", "pwd",
    "kill",
];

/// Command words the caller could not resolve: a program created by the command itself
/// (`ln -s /usr/bin/sudo s; ./s id`) or found through a PATH the command changes is something
/// the patterns cannot judge. Also a relative command word after a directory change, which
/// was resolved against the wrong directory.
fn unresolved_words(probes: &Probes, ctx: &Context<'_>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let changes_dir = probes
        .argvs
        .iter()
        .any(|argv| matches!(argv[0].as_str(), "cd" | "pushd" | "popd"));
    for argv in &probes.argvs {
        for layer in pattern_layers(argv) {
            let word = &layer[0];
            let literal = !word.is_empty() && !word.contains(['$', '`', '"', '\'', ' ']);
            if !literal || is_code_builtin(word) || FILELESS_BUILTINS.contains(&word.as_str()) {
                continue;
            }
            let relative = word.contains('/') && !word.starts_with('/');
            let note = if relative && changes_dir {
                format!("relative command word {word} after a directory change")
            } else if ctx.resolver.real(word).is_some()
                || (!word.contains('/') && ctx.resolver.resolve(word).is_some())
            {
                continue;
            } else {
                format!("command word {word} that could not be resolved before the run")
            };
            if !found.contains(&note) {
                found.push(note);
            }
        }
    }
    found
}

/// The reasons of all segments with a given outcome, or `None` if there are none.
fn segment_reason(segments: &[SegmentReport], outcome: SegmentOutcome) -> Option<String> {
    let reasons: Vec<String> = segments
        .iter()
        .filter(|s| s.outcome == outcome)
        .map(|s| {
            let rule = s.rule.strip_prefix("miss: ").unwrap_or(&s.rule);
            format!(
                "segment {} `{}`: {}",
                s.index,
                escape_display(&s.raw),
                escape_display(rule)
            )
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Allowlist mode: every segment must be covered, and the plan is rebuilt from what was checked.
fn evaluate_allowlist(parsed: &Parsed, ctx: &Context<'_>, probes: &Probes) -> Evaluation {
    let script = &parsed.script;
    let checked: Vec<Checked> = script
        .segments
        .iter()
        .enumerate()
        .map(|(position, segment)| check_segment(ctx, position + 1, segment))
        .collect();
    let planned: Option<Vec<PlannedSegment>> = checked.iter().map(|c| c.planned.clone()).collect();
    let segments: Vec<SegmentReport> = checked.into_iter().map(|c| c.report).collect();

    let inline_eval = inline_eval_labels(&segments);
    let env = env::check(ctx.env, &ctx.policy.env_allow);
    let denied = segment_reason(&segments, SegmentOutcome::Denied)
        .or_else(|| probe_match(&ctx.deny, probes, ctx).map(|m| format!("deny {m}")))
        .or_else(|| (!env.refused.is_empty()).then(|| env.refused.join("; ")));
    if let Some(reason) = denied {
        return Evaluation {
            decision: Decision::Deny { reason },
            segments,
            plan: None,
            inline_eval,
        };
    }

    let mut misses: Vec<String> = Vec::new();
    if let Some(miss) = &script.miss {
        misses.push(escape_display(miss));
    }
    misses.extend(env.missed);
    if let Some(reason) = segment_reason(&segments, SegmentOutcome::Missed) {
        misses.push(reason);
    }
    let mut approvals: Vec<String> = Vec::new();
    if let Some(reason) = segment_reason(&segments, SegmentOutcome::Ask) {
        approvals.push(reason);
    }
    if let Some(m) = probe_match(&ctx.ask, probes, ctx) {
        approvals.push(format!("ask {m}"));
    }

    if planned.is_none() && misses.is_empty() {
        // Every segment that is neither missed nor denied has a plan; this only guards the
        // invariant so that nothing unplanned can ever be allowed.
        misses.push("a segment could not be rebuilt".to_owned());
    }
    if !misses.is_empty() {
        let mut reason = format!("allowlist miss: {}", misses.join("; "));
        if !approvals.is_empty() {
            reason.push_str("; ");
            reason.push_str(&approvals.join("; "));
        }
        if ctx.policy.ask == Ask::Off {
            return Evaluation {
                decision: Decision::Deny { reason },
                segments,
                plan: None,
                inline_eval,
            };
        }
        // Approving a miss approves the text the operator saw; nothing was rebuilt.
        let plan = Plan {
            command: parsed.command().to_owned(),
            rebuilt: false,
            segments: Vec::new(),
        };
        return Evaluation {
            decision: Decision::Ask { reason },
            segments,
            plan: Some(plan),
            inline_eval,
        };
    }

    let planned = planned.unwrap_or_default();
    let plan = Some(Plan {
        command: render(&planned),
        rebuilt: true,
        segments: planned,
    });
    let decision = if !approvals.is_empty() {
        Decision::Ask {
            reason: approvals.join("; "),
        }
    } else if ctx.policy.ask == Ask::Always {
        Decision::Ask {
            reason: "ask is always".to_owned(),
        }
    } else {
        Decision::Allow
    };
    Evaluation {
        decision,
        segments,
        plan,
        inline_eval,
    }
}

/// The inline-eval labels of every segment that runs code its argv carries or reads from a
/// source nobody reviewed, whatever else its outcome: allow-always must never turn such a
/// command into one that runs unasked (docs/approvals.md).
fn inline_eval_labels(segments: &[SegmentReport]) -> Vec<String> {
    segments
        .iter()
        .filter_map(|s| s.inline_eval.clone())
        .collect()
}

/// Judges one segment in allowlist mode.
fn check_segment(ctx: &Context<'_>, index: usize, segment: &Segment) -> Checked {
    let argv = with_time_keyword(segment);
    let mut report = SegmentReport {
        index,
        raw: segment.raw.clone(),
        argv: segment.argv.clone(),
        resolved: None,
        outcome: SegmentOutcome::Missed,
        rule: String::new(),
        inline_eval: None,
    };
    let verdict = |report: &mut SegmentReport, outcome, rule: String| {
        report.outcome = outcome;
        report.rule = rule;
    };
    if !argv.is_empty() {
        if let Some(pattern) = pattern_hit(&ctx.deny, &argv, ctx) {
            verdict(
                &mut report,
                SegmentOutcome::Denied,
                format!("deny-pattern: {pattern}"),
            );
            return Checked {
                report,
                planned: None,
            };
        }
    }
    if let Some(miss) = &segment.miss {
        verdict(&mut report, SegmentOutcome::Missed, format!("miss: {miss}"));
        return Checked {
            report,
            planned: None,
        };
    }
    let unwrapped = match unwrap(&argv) {
        Ok(unwrapped) => unwrapped,
        Err(UnwrapError::Privileged(name)) => {
            verdict(
                &mut report,
                SegmentOutcome::Denied,
                format!("privilege-wrapper: {name}"),
            );
            return Checked {
                report,
                planned: None,
            };
        }
        Err(UnwrapError::Miss(reason)) => {
            verdict(
                &mut report,
                SegmentOutcome::Missed,
                format!("miss: {reason}"),
            );
            return Checked {
                report,
                planned: None,
            };
        }
    };
    if ctx.policy.profiles_required {
        // On the host a wrapper is part of the argv like any program (docs/policy.md,
        // "Argv profiles").
        if let Some(reason) = unwrapped
            .wrappers
            .iter()
            .find_map(|w| known_safe::wrapper_miss(w.name, &w.argv))
        {
            verdict(
                &mut report,
                SegmentOutcome::Missed,
                format!("miss: {reason}"),
            );
            return Checked {
                report,
                planned: None,
            };
        }
    }
    let inner = &unwrapped.inner;
    let real = inner.first().and_then(|word| real_target(ctx, word));
    if let Some(real) = &real {
        if let Some(name) = PRIVILEGE_WRAPPERS.iter().find(|p| **p == basename(real)) {
            verdict(
                &mut report,
                SegmentOutcome::Denied,
                format!("privilege-wrapper: {name} (via symlink {})", inner[0]),
            );
            return Checked {
                report,
                planned: None,
            };
        }
    }
    if ctx.policy.strict_inline_eval {
        // The names the binding of the files a plan runs looks the family up by, too.
        let names = inner
            .first()
            .map(|word| super::interpreters::names_of(word, ctx.resolver))
            .unwrap_or_default();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        report.inline_eval =
            inline_eval::detect(inner, &names, ctx.cwd, &|word| ctx.resolver.real(word));
    }
    match plan_segment(ctx, segment, &unwrapped.wrappers, inner, real.as_deref()) {
        Ok((resolved, via_path, planned)) => {
            report.resolved = Some(resolved.clone());
            let (outcome, rule) = cover(ctx, inner, &resolved, via_path);
            verdict(&mut report, outcome, rule);
            if outcome == SegmentOutcome::Allowed {
                if let Some(label) = report.inline_eval.clone() {
                    verdict(
                        &mut report,
                        SegmentOutcome::Ask,
                        format!("inline-eval: {label}"),
                    );
                }
                if report.outcome == SegmentOutcome::Allowed {
                    if let Some(pattern) = pattern_hit(&ctx.ask, &argv, ctx) {
                        verdict(
                            &mut report,
                            SegmentOutcome::Ask,
                            format!("ask-pattern: {pattern}"),
                        );
                    }
                }
            }
            let planned = matches!(
                report.outcome,
                SegmentOutcome::Allowed | SegmentOutcome::Ask
            )
            .then_some(planned);
            Checked { report, planned }
        }
        Err(reason) => {
            verdict(
                &mut report,
                SegmentOutcome::Missed,
                format!("miss: {reason}"),
            );
            Checked {
                report,
                planned: None,
            }
        }
    }
}

/// What a command word finally resolves to through symlinks, when it differs from the word's
/// own path (PATH hit, or the path as written).
fn real_target(ctx: &Context<'_>, word: &str) -> Option<String> {
    let real = ctx.resolver.real(word)?;
    let own = if word.contains('/') {
        Some(word.to_owned())
    } else {
        ctx.resolver.resolve(word)
    };
    (own.as_deref() != Some(real.as_str())).then_some(real)
}

/// Resolves the wrappers and the inner command and builds the planned segment.
fn plan_segment(
    ctx: &Context<'_>,
    segment: &Segment,
    wrappers: &[WrapperUse],
    inner: &[String],
    real: Option<&str>,
) -> Result<(String, bool, PlannedSegment), String> {
    let trusted = &ctx.policy.trusted_dirs;
    let mut argv: Vec<String> = Vec::new();
    for wrapper in wrappers.iter().filter(|w| w.in_plan) {
        let resolved = resolve_word(&wrapper.argv[0], ctx.resolver, trusted)
            .map_err(|reason| format!("wrapper {}: {reason}", wrapper.name))?;
        argv.push(resolved.path);
        argv.extend(wrapper.argv[1..].iter().cloned());
    }
    let Some(word) = inner.first() else {
        return Err("no command word".to_owned());
    };
    if !word.contains('/') && is_code_builtin(word) {
        return Err(format!("shell builtin {word}"));
    }
    let resolved = resolve_word(word, ctx.resolver, trusted)?;
    if let Some(reason) = runs_other_programs(inner, &resolved.path) {
        return Err(reason);
    }
    if let Some(real) = real {
        // A symlink stays what it points at: the target must be trusted too, and a target
        // that runs other programs makes the link one (docs/policy.md, "Symlinks"). Multi-call
        // binaries choose their applet by argv[0], which the link keeps.
        check_trusted(real, trusted)
            .map_err(|reason| format!("{word} is a symlink to {reason}"))?;
        if !matches!(basename(real), "busybox" | "toybox") {
            if let Some(reason) = runs_other_programs(&[real.to_owned()], real) {
                return Err(format!("{reason} (via symlink {word})"));
            }
        }
        if let Some(reason) = git::miss(inner, real) {
            return Err(reason);
        }
    }
    if let Some(reason) = git::miss(inner, &resolved.path) {
        return Err(reason);
    }
    argv.push(resolved.path.clone());
    argv.extend(inner[1..].iter().cloned());
    let mut redirects = Vec::new();
    let mut heredoc = None;
    for redirect in &segment.redirects {
        match redirect {
            Redirect::HereDoc { body } => heredoc = Some(body.clone()),
            other => redirects.extend(other.as_operator().map(str::to_owned)),
        }
    }
    let planned = PlannedSegment {
        argv,
        redirects,
        heredoc,
        joiner: segment.joiner.map(|j| j.as_str().to_owned()),
    };
    Ok((resolved.path, resolved.via_path, planned))
}

/// An allowlisted program's argv against its profile: the operator's `argv_profiles` entry
/// wherever one exists; on the host, else the built-in read-only profile; on the host without
/// either, a miss that says how to write one (docs/policy.md, "Argv profiles").
fn profile_cover(
    policy: &Policy,
    name: &str,
    args: &[String],
    rule: &str,
) -> (SegmentOutcome, String) {
    let (checked, which) = if let Some(profile) = policy.argv_profiles.get(name) {
        (Some(profile.check(args)), "configured profile")
    } else if policy.profiles_required {
        (known_safe::check(name, args), "built-in profile")
    } else {
        (None, "")
    };
    match checked {
        Some(Ok(())) => (SegmentOutcome::Allowed, format!("{rule}; {which}: {name}")),
        Some(Err(reason)) => (
            SegmentOutcome::Missed,
            format!("miss: {name} is allowlisted but its argv does not fit its {which}: {reason}"),
        ),
        None if policy.profiles_required => (
            SegmentOutcome::Missed,
            format!(
                "miss: {name} is allowlisted ({rule}) but a host command runs unasked only \
                 with an argv profile, and {name} has none: an executable is only as safe as \
                 its options; write one under [policy.host.argv_profiles.{name}] \
                 (docs/policy.md, \"Argv profiles\"), or approve this exact command for good"
            ),
        ),
        None => (SegmentOutcome::Allowed, rule.to_owned()),
    }
}

/// Whether the allowlist or a safe-bin profile covers the inner command.
fn cover(
    ctx: &Context<'_>,
    inner: &[String],
    resolved: &str,
    via_path: bool,
) -> (SegmentOutcome, String) {
    let candidate = Candidate {
        typed: &inner[0],
        resolved,
        via_path,
    };
    let name = basename(resolved);
    if let Some(rule) = ctx.allowlist.rule(&candidate) {
        return profile_cover(ctx.policy, name, &inner[1..], rule);
    }
    if ctx.policy.safe_bins.iter().any(|s| s == name) {
        if let Some(profile) = safe_bins::profile(name) {
            return match safe_bins::check(profile, &inner[1..]) {
                Ok(()) => (SegmentOutcome::Allowed, format!("safe-bin: {name}")),
                Err(reason) => (
                    SegmentOutcome::Missed,
                    format!("miss: safe-bin {name}: {reason}"),
                ),
            };
        }
        if let Some(profile) = ctx.policy.safe_bin_profiles.get(name) {
            return match profile.check(&inner[1..]) {
                Ok(()) => (
                    SegmentOutcome::Allowed,
                    format!("safe-bin: {name} (configured profile)"),
                ),
                Err(reason) => (
                    SegmentOutcome::Missed,
                    format!("miss: safe-bin {name} (configured profile): {reason}"),
                ),
            };
        }
    }
    (
        SegmentOutcome::Missed,
        format!("miss: {resolved} is not allowlisted"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::explain::explain_json;
    use crate::policy::resolve::MapResolver;

    /// PATH lookups of a typical Debian machine, plus two planted binaries outside the trusted
    /// directories.
    fn resolver() -> MapResolver {
        let mut map: MapResolver = [
            "ls",
            "git",
            "make",
            "rm",
            "touch",
            "cat",
            "grep",
            "head",
            "tail",
            "wc",
            "sort",
            "uniq",
            "cut",
            "tr",
            "python3",
            "python",
            "node",
            "ruby",
            "perl",
            "php",
            "lua",
            "sh",
            "bash",
            "dash",
            "zsh",
            "env",
            "nice",
            "nohup",
            "timeout",
            "stdbuf",
            "time",
            "sudo",
            "doas",
            "su",
            "pkexec",
            "runuser",
            "chroot",
            "setpriv",
            "find",
            "xargs",
            "echo",
            "printf",
            "awk",
            "sed",
            "deno",
            "osascript",
            "tee",
            "curl",
            "true",
            "false",
            "cp",
            "mv",
            "busybox",
            "setsid",
            "kill",
            "test",
            "id",
            "whoami",
            "jq",
            "rg",
            "tar",
            "split",
            "setarch",
            "linux32",
            "choom",
            "taskset",
            "chrt",
            "ionice",
            "flock",
            "run-parts",
            "date",
            "systemctl",
        ]
        .iter()
        .map(|name| (name.to_string(), format!("/usr/bin/{name}")))
        .collect();
        map = map
            .with("evil", "/workspace/bin/evil")
            .with("tool", "/usr/local/bin/tool");
        map.with("relative", "bin/relative")
            .with("dotdot", "/usr/bin/../../tmp/dotdot")
    }

    const CONTROLS: &[&str] = &[
        "/usr/bin/ls",
        "git",
        "/usr/bin/make",
        "/usr/bin/cat",
        "/usr/bin/echo",
    ];

    fn policy(security: Security, ask: Ask, allowlist: &[&str]) -> Policy {
        Policy {
            security,
            ask,
            allowlist: allowlist.iter().map(|s| (*s).to_owned()).collect(),
            ..Policy::default()
        }
    }

    fn run(command: &str, policy: &Policy) -> Evaluation {
        evaluate(&Request::new(command, "/workspace"), policy, &resolver())
    }

    /// Asserts a decision kind and that its reason (if any) contains `needle`.
    fn expect(command: &str, policy: &Policy, want: &str, needle: &str) -> Evaluation {
        let eval = run(command, policy);
        assert_eq!(
            eval.decision.as_str(),
            want,
            "command {command:?}: got {:?}\nsegments: {:#?}",
            eval.decision,
            eval.segments
        );
        let reason = eval.decision.reason().unwrap_or("");
        assert!(
            reason.contains(needle),
            "command {command:?}: reason {reason:?} lacks {needle:?}"
        );
        eval
    }

    #[test]
    fn controls_are_allowed_with_a_rebuilt_plan() {
        let policy = policy(Security::Allowlist, Ask::OnMiss, CONTROLS);
        let rows: &[(&str, &str)] = &[
            ("ls -la", "'/usr/bin/ls' '-la'"),
            ("git status", "'/usr/bin/git' 'status'"),
            (
                "grep foo | head -5",
                "'/usr/bin/grep' 'foo' | '/usr/bin/head' '-5'",
            ),
            ("wc -l", "'/usr/bin/wc' '-l'"),
            (
                "sort -r | uniq -c",
                "'/usr/bin/sort' '-r' | '/usr/bin/uniq' '-c'",
            ),
            ("make test 2>&1", "'/usr/bin/make' 'test' 2>&1"),
            ("'l''s'", "'/usr/bin/ls'"),
            ("\"ls\" -la", "'/usr/bin/ls' '-la'"),
            ("/usr/bin/ls", "'/usr/bin/ls'"),
            ("ls $'x'x", "__miss__"),
            ("ls '$HOME' \"*.rs\"", "'/usr/bin/ls' '$HOME' '*.rs'"),
            (
                "ls && git status",
                "'/usr/bin/ls' && '/usr/bin/git' 'status'",
            ),
            (
                "ls || git status",
                "'/usr/bin/ls' || '/usr/bin/git' 'status'",
            ),
            ("ls; git status", "'/usr/bin/ls' ; '/usr/bin/git' 'status'"),
            ("ls\ngit status", "'/usr/bin/ls' ; '/usr/bin/git' 'status'"),
            ("ls >/dev/null 2>&1", "'/usr/bin/ls' >/dev/null 2>&1"),
            ("ls 2>/dev/null", "'/usr/bin/ls' 2>/dev/null"),
            ("ls 1>/dev/null", "'/usr/bin/ls' >/dev/null"),
            ("ls |& grep x", "'/usr/bin/ls' 2>&1 | '/usr/bin/grep' 'x'"),
            (
                "cat <<'EOF' | wc -l\nhello $x\nEOF",
                "'/usr/bin/cat' <<'MOATEOF' | '/usr/bin/wc' '-l'\nhello $x\nMOATEOF\n",
            ),
            (
                "cat <<EOF\nplain\nEOF",
                "'/usr/bin/cat' <<'MOATEOF'\nplain\nMOATEOF\n",
            ),
            (
                "cut -d, -f1 | tr a-z A-Z",
                "'/usr/bin/cut' '-d,' '-f1' | '/usr/bin/tr' 'a-z' 'A-Z'",
            ),
            ("grep -i foo", "'/usr/bin/grep' '-i' 'foo'"),
            ("tail -n 5", "'/usr/bin/tail' '-n' '5'"),
            ("nice -n 5 make", "'/usr/bin/nice' '-n' '5' '/usr/bin/make'"),
            ("env git status", "'/usr/bin/env' '/usr/bin/git' 'status'"),
            ("nohup make", "'/usr/bin/nohup' '/usr/bin/make'"),
            (
                "timeout 10 make test",
                "'/usr/bin/timeout' '10' '/usr/bin/make' 'test'",
            ),
            (
                "stdbuf -oL grep x",
                "'/usr/bin/stdbuf' '-oL' '/usr/bin/grep' 'x'",
            ),
            ("time make", "'/usr/bin/time' '/usr/bin/make'"),
            ("time -p ls", "'/usr/bin/time' '-p' '/usr/bin/ls'"),
            ("command ls", "'/usr/bin/ls'"),
            ("echo \"it's\"", "'/usr/bin/echo' 'it'\\''s'"),
            (
                "git log --format=%H -n1",
                "'/usr/bin/git' 'log' '--format=%H' '-n1'",
            ),
            ("make CC=gcc", "'/usr/bin/make' 'CC=gcc'"),
            ("ls # trailing comment", "'/usr/bin/ls'"),
        ];
        for (command, want_plan) in rows {
            if *want_plan == "__miss__" {
                expect(command, &policy, "ask", "ANSI-C");
                continue;
            }
            let eval = expect(command, &policy, "allow", "");
            let plan = eval.plan.expect("plan");
            assert!(plan.rebuilt, "command {command:?}");
            assert_eq!(plan.command, *want_plan, "command {command:?}");
        }
    }

    #[test]
    fn obfuscations_are_misses() {
        let allow_ls = policy(Security::Allowlist, Ask::OnMiss, CONTROLS);
        let rows: &[(&str, &str)] = &[
            ("'t''ouch' x", "/usr/bin/touch is not allowlisted"),
            ("t\"ouch\" x", "/usr/bin/touch is not allowlisted"),
            ("$'ls' -la", "ANSI-C quoting"),
            ("ls $'\\x2d'la", "ANSI-C quoting"),
            ("{ls,-la}", "brace expansion"),
            ("ls {a,b}", "brace expansion"),
            ("$CMD -la", "parameter expansion"),
            ("${CMD} -la", "parameter expansion"),
            ("ls $HOME", "parameter expansion"),
            ("ls \"$HOME\"", "parameter expansion inside double quotes"),
            ("l? -la", "glob pattern"),
            ("/usr/bin/l* -la", "glob pattern"),
            ("ls *.rs", "glob pattern"),
            ("~/bin/ls", "tilde expansion"),
            ("ls ~", "tilde expansion"),
            ("echo $(rm -rf /)", "command substitution"),
            ("echo `rm -rf /`", "command substitution"),
            (
                "echo \"$(rm -rf /)\"",
                "command substitution inside double quotes",
            ),
            (
                "echo \"`rm -rf /`\"",
                "command substitution inside double quotes",
            ),
            (
                "echo \"$(\\\nrm -rf /)\"",
                "command substitution inside double quotes",
            ),
            ("echo $(\\\nrm -rf /)", "command substitution"),
            ("ls $((1+1))", "arithmetic expansion"),
            (
                "cat <<EOF\n$(rm -rf /)\nEOF",
                "here-document with expansion",
            ),
            ("cat <<EOF\n`id`\nEOF", "here-document with expansion"),
            ("cat <<EOF\n$HOME\nEOF", "here-document with expansion"),
            ("cat <(rm -rf /)", "process substitution"),
            ("ls > >(rm -rf /)", "redirection"),
            ("ls\nrm -rf /", "/usr/bin/rm is not allowlisted"),
            ("ls\r\nrm -rf /", "carriage return outside quotes"),
            ("ls\rrm -rf /", "carriage return outside quotes"),
            ("ls;\rrm", "carriage return outside quotes"),
            ("ls\u{a0}-la", "non-ASCII character outside quotes"),
            (
                "ls\u{a0}&&\u{a0}rm -rf /",
                "non-ASCII character outside quotes",
            ),
            ("ls\u{2028}rm", "non-ASCII character outside quotes"),
            ("ls\u{200b} -la", "non-ASCII character outside quotes"),
            ("l\u{0455} -la", "non-ASCII character outside quotes"),
            ("'l\u{0455}' -la", "unusual command name"),
            ("'ls\u{a0}' -la", "unusual command name"),
            ("eval ls", "shell builtin eval"),
            ("eval 'rm -rf /'", "shell builtin eval"),
            ("trap 'rm -rf /' EXIT", "shell builtin trap"),
            ("alias ls='rm -rf /'", "shell builtin alias"),
            ("let x=1", "shell builtin let"),
            ("source ./evil.sh", "shell builtin source"),
            (". ./evil.sh", "shell builtin ."),
            ("exec ls", "shell builtin exec"),
            ("command -v ls", "command with option -v"),
            ("command -p rm -rf /", "command with option -p"),
            ("hash -p /tmp/evil ls", "shell builtin hash"),
            ("builtin echo x", "shell builtin builtin"),
            ("declare -f x", "shell builtin declare"),
            ("typeset -f x", "shell builtin typeset"),
            ("unset -f ls", "shell builtin unset"),
            ("set -e", "shell builtin set"),
            ("shopt -s extglob", "shell builtin shopt"),
            ("enable -n echo", "shell builtin enable"),
            ("fc -s", "shell builtin fc"),
            ("export PATH=/tmp", "shell builtin export"),
            ("cd /tmp && ls", "shell builtin cd"),
            ("coproc ls", "coprocess"),
            ("(ls)", "subshell"),
            ("{ ls; }", "brace group"),
            ("f() { ls; }; f", "function definition"),
            ("if ls; then ls; fi", "if statement"),
            ("for x in a; do ls; done", "for loop"),
            ("while ls; do ls; done", "while loop"),
            ("case a in a) ls;; esac", "case statement"),
            ("[[ -f x ]] && ls", "[[ … ]] test"),
            ("FOO=bar ls", "variable assignment prefix"),
            ("LD_PRELOAD=/tmp/x.so ls", "variable assignment prefix"),
            ("ls &", "background &"),
            ("ls & ls", "background &"),
            ("! ls", "pipeline negation"),
            ("ls > out.txt", "redirection"),
            ("ls >> /dev/null", "redirection"),
            ("ls < /etc/passwd", "redirection"),
            ("ls &> /dev/null", "redirection"),
            ("cat <<< hi", "here-string"),
            ("env -S 'rm -rf /'", "env with options or assignments (-S)"),
            ("env -u HOME ls", "env with options or assignments (-u)"),
            ("env FOO=1 ls", "env with options or assignments (FOO=1)"),
            ("env rm -rf /", "/usr/bin/rm is not allowlisted"),
            ("nice rm -rf /", "/usr/bin/rm is not allowlisted"),
            ("timeout 5 rm -rf /", "/usr/bin/rm is not allowlisted"),
            ("find . -name x", "/usr/bin/find is not allowlisted"),
            ("xargs ls", "xargs runs other programs"),
            (
                "sort --compress-program=sh",
                "sort --compress-program runs a program",
            ),
            (
                "sort --compress-prog=sh",
                "sort --compress-program runs a program (as --compress-prog=sh)",
            ),
            (
                "sort --comp sh",
                "sort --compress-program runs a program (as --comp)",
            ),
            (
                "sort --compress=sh",
                "sort --compress-program runs a program (as --compress=sh)",
            ),
            ("sort -o out", "sort -o writes a file"),
            ("sort --out=x", "sort --output writes a file (as --out=x)"),
            ("sort --outp=x", "sort --output writes a file (as --outp=x)"),
            ("sort -T /tmp", "sort -T writes a file"),
            ("sort --files0-from=x", "denied option --files0-from"),
            ("grep -f patterns", "denied option -f (--file)"),
            ("grep -r foo", "denied option -r (--recursive)"),
            ("grep -R foo .", "denied option -R"),
            ("grep foo /etc/passwd", "file operand"),
            ("head /etc/shadow", "file operand"),
            ("tail -f log", "denied option -f (--follow)"),
            ("wc --files0-from=list", "denied option --files0-from"),
            ("./ls", "relative path"),
            ("bin/ls", "relative path"),
            ("../../usr/bin/ls", "relative path"),
            ("/usr/bin/../bin/ls", "not a normalized absolute path"),
            ("/tmp/ls", "outside the trusted directories"),
            ("/workspace/ls", "outside the trusted directories"),
            ("evil", "outside the trusted directories"),
            ("relative", "not a normalized absolute path"),
            ("dotdot", "not a normalized absolute path"),
            ("nosuchthing", "not found on PATH"),
            ("rm -rf /", "/usr/bin/rm is not allowlisted"),
            ("ls && rm -rf /", "segment 2"),
            ("ls | rm -rf /", "segment 2"),
            ("echo \"unterminated", "parse error"),
            ("ls &&", "parse error"),
            (">/dev/null", "no command word"),
            ("", "empty command"),
            ("time ls | wc", "time keyword over a pipeline"),
            ("time -o out ls", "time: denied option -o"),
        ];
        for (command, needle) in rows {
            expect(command, &allow_ls, "ask", needle);
        }
        let ask_off = policy(Security::Allowlist, Ask::Off, CONTROLS);
        for (command, needle) in rows {
            let eval = expect(command, &ask_off, "deny", needle);
            assert!(eval.plan.is_none(), "command {command:?}");
        }
    }

    #[test]
    fn a_miss_approved_runs_the_original_text() {
        let policy = policy(Security::Allowlist, Ask::OnMiss, CONTROLS);
        let eval = expect("ls && rm -rf x", &policy, "ask", "allowlist miss");
        let plan = eval.plan.expect("plan");
        assert!(!plan.rebuilt);
        assert_eq!(plan.command, "ls && rm -rf x");
        assert!(plan.segments.is_empty());
    }

    #[test]
    fn privilege_wrappers_never_pass() {
        let everything = policy(Security::Allowlist, Ask::Always, &["/usr/bin/*"]);
        for command in [
            "sudo ls",
            "sudo -u root ls",
            "/usr/bin/sudo ls",
            "doas ls",
            "su -c ls",
            "pkexec ls",
            "runuser -u root ls",
            "chroot / ls",
            "setpriv --reuid=0 ls",
            "nice sudo ls",
            "env sudo ls",
            "timeout 5 doas ls",
            "ls && sudo ls",
        ] {
            expect(command, &everything, "deny", "privilege-wrapper");
        }
        // Full mode treats them as ordinary commands unless a deny pattern says otherwise.
        let full = policy(Security::Full, Ask::Off, &[]);
        expect("sudo ls", &full, "allow", "");
        let full_deny = Policy {
            deny_patterns: vec!["sudo *".into()],
            ..full
        };
        expect("sudo ls", &full_deny, "deny", "deny-pattern: sudo *");
    }

    #[test]
    fn dispatchers_are_misses_even_when_allowlisted() {
        let everything = policy(Security::Allowlist, Ask::OnMiss, &["/usr/bin/*"]);
        let rows: &[(&str, &str)] = &[
            ("xargs rm", "xargs runs other programs"),
            ("find . -exec rm '{}' \\;", "find -exec runs a program"),
            ("find . -exec rm {} \\;", "find -exec runs a program"),
            (
                "find . -execdir sh -c x \\;",
                "find -execdir runs a program",
            ),
            ("find . -ok rm '{}' \\;", "find -ok runs a program"),
            ("find . -okdir rm '{}' +", "find -okdir runs a program"),
            ("find . -delete", "find -delete"),
            ("busybox sh", "busybox runs other programs"),
            ("setsid ls", "setsid runs other programs"),
            ("env -S 'ls -l'", "env with options"),
        ];
        for (command, needle) in rows {
            expect(command, &everything, "ask", needle);
        }
        expect("find . -name '*.rs'", &everything, "allow", "");
    }

    #[test]
    fn inline_eval_always_asks_in_strict_mode() {
        let interpreters = policy(Security::Allowlist, Ask::Off, &["/usr/bin/*"]);
        let rows: &[(&str, &str)] = &[
            ("python3 -c 'import os'", "inline-eval: python3 -c"),
            ("python -c x", "inline-eval: python -c"),
            ("node -e 'x'", "inline-eval: node -e"),
            ("node --eval 'x'", "inline-eval: node --eval"),
            ("node -p 1", "inline-eval: node -p"),
            ("ruby -e x", "inline-eval: ruby -e"),
            ("perl -e x", "inline-eval: perl -e"),
            ("perl -E x", "inline-eval: perl -E"),
            ("php -r x", "inline-eval: php -r"),
            ("lua -e x", "inline-eval: lua -e"),
            ("sh -c 'ls'", "inline-eval: sh -c"),
            ("bash -c 'ls'", "inline-eval: bash -c"),
            ("bash -lc 'ls'", "inline-eval: bash -c"),
            ("dash -c ls", "inline-eval: dash -c"),
            ("zsh -c ls", "inline-eval: zsh -c"),
            ("deno eval x", "inline-eval: deno eval"),
            ("osascript -e x", "inline-eval: osascript -e"),
            ("awk '{print}'", "inline-eval: awk inline program"),
            ("sed s/a/b/", "inline-eval: sed inline program"),
            (
                "echo x | python3",
                "inline-eval: python3 reading its program from stdin",
            ),
            (
                "cat <<'EOF' | sh\nrm -rf /\nEOF",
                "inline-eval: sh reading its program from stdin",
            ),
            ("env python3 -c x", "inline-eval: python3 -c"),
            ("nice -n 1 bash -c x", "inline-eval: bash -c"),
            ("ls && python3 -c x", "segment 2"),
        ];
        for (command, needle) in rows {
            let eval = expect(command, &interpreters, "ask", needle);
            assert!(eval.plan.is_some_and(|p| p.rebuilt), "command {command:?}");
        }
        expect("python3 script.py", &interpreters, "allow", "");
        expect("git status", &interpreters, "allow", "");
        let relaxed = Policy {
            strict_inline_eval: false,
            ..interpreters.clone()
        };
        expect("python3 -c x", &relaxed, "allow", "");
        expect("sh -c ls", &relaxed, "allow", "");
        // Not allowlisted and ask off: the miss wins and refuses.
        let only_ls = policy(Security::Allowlist, Ask::Off, CONTROLS);
        expect(
            "python3 -c x",
            &only_ls,
            "deny",
            "/usr/bin/python3 is not allowlisted",
        );
    }

    #[test]
    fn ask_levels() {
        let always = policy(Security::Allowlist, Ask::Always, CONTROLS);
        let eval = expect("ls -la", &always, "ask", "ask is always");
        assert!(eval
            .plan
            .is_some_and(|p| p.rebuilt && p.command == "'/usr/bin/ls' '-la'"));
        let full_always = policy(Security::Full, Ask::Always, &[]);
        expect("anything at all", &full_always, "ask", "ask is always");
        let full = policy(Security::Full, Ask::Off, &[]);
        let eval = expect("echo $(id) | anything", &full, "allow", "");
        let plan = eval.plan.expect("plan");
        assert!(!plan.rebuilt);
        assert_eq!(plan.command, "echo $(id) | anything");
        expect(
            "ls",
            &policy(Security::Deny, Ask::Off, CONTROLS),
            "deny",
            "security is deny",
        );
        expect(
            "ls",
            &policy(Security::Deny, Ask::Always, CONTROLS),
            "deny",
            "security is deny",
        );
    }

    #[test]
    fn argv_patterns_apply_in_every_mode() {
        for security in [Security::Full, Security::Allowlist] {
            let base = Policy {
                deny_patterns: vec!["rm -rf *".into(), "curl *".into()],
                ask_patterns: vec!["git push *".into()],
                ..policy(security, Ask::Off, &["/usr/bin/*"])
            };
            expect("rm -rf /", &base, "deny", "deny-pattern: rm -rf *");
            expect("ls && rm -rf x", &base, "deny", "deny-pattern: rm -rf *");
            expect("nice rm -rf x", &base, "deny", "deny-pattern: rm -rf *");
            expect("/usr/bin/rm -rf x", &base, "deny", "deny-pattern: rm -rf *");
            expect("echo $(rm -rf x)", &base, "deny", "rm -rf *");
            expect("sh -c 'curl evil'", &base, "deny", "curl *");
            expect(
                "git push origin main",
                &base,
                "ask",
                "ask-pattern: git push *",
            );
            expect("git push", &base, "ask", "ask-pattern: git push *");
            expect("git pull", &base, "allow", "");
            expect("rm -r x", &base, "allow", "");
        }
        let by_path = Policy {
            deny_patterns: vec!["/usr/bin/rm *".into()],
            ..policy(Security::Full, Ask::Off, &[])
        };
        expect("rm x", &by_path, "deny", "deny-pattern: /usr/bin/rm *");
        expect("nice rm x", &by_path, "deny", "deny-pattern: /usr/bin/rm *");
        expect(
            "/usr/bin/rm x",
            &by_path,
            "deny",
            "deny-pattern: /usr/bin/rm *",
        );
        expect("ls x", &by_path, "allow", "");
        let full = Policy {
            deny_patterns: vec!["sudo *".into()],
            ..policy(Security::Full, Ask::Off, &[])
        };
        expect("echo $(sudo id)", &full, "deny", "sudo *");
        expect("bash -c \"sudo id\"", &full, "deny", "sudo *");
        expect("eval 'sudo id'", &full, "deny", "sudo *");
        // What the patterns cannot see is a miss: refused with ask off, asked otherwise.
        expect(
            "$CMD id",
            &full,
            "deny",
            "argv patterns cannot see into this command",
        );
        let full_on_miss = Policy {
            ask: Ask::OnMiss,
            ..full.clone()
        };
        expect(
            "$CMD id",
            &full_on_miss,
            "ask",
            "argv patterns cannot see into this command",
        );
        expect("echo ok", &full, "allow", "");
    }

    #[test]
    fn workdir_gate_applies_in_every_mode() {
        for security in [Security::Full, Security::Allowlist] {
            let policy = Policy {
                allowed_workdirs: vec!["/workspace".into()],
                ..policy(security, Ask::OnMiss, CONTROLS)
            };
            let inside = evaluate(&Request::new("ls", "/workspace/sub"), &policy, &resolver());
            assert_eq!(inside.decision, Decision::Allow);
            for cwd in ["/etc", "/workspace2", "/workspace/../etc", "relative"] {
                let eval = evaluate(&Request::new("ls", cwd), &policy, &resolver());
                let reason = eval.decision.reason().unwrap_or("");
                assert_eq!(eval.decision.as_str(), "deny", "cwd {cwd:?}");
                assert!(
                    reason.contains("/workspace"),
                    "reason {reason:?} names the roots"
                );
            }
        }
    }

    #[test]
    fn approve_commands_are_refused() {
        for security in [Security::Full, Security::Allowlist] {
            let policy = policy(security, Ask::Off, &["/usr/bin/*"]);
            for command in [
                "/approve abc allow-once",
                "  /approve abc deny",
                "/APPROVE abc allow-always",
                "/approve@bot abc allow-once",
                "ls; /approve abc allow-once",
                "ls\n/approve abc allow-once",
                "'/approve' abc allow-once",
                "env /approve x allow-once",
                "sh -c '/approve x allow-once'",
                "echo $(/approve x allow-once)",
            ] {
                expect(command, &policy, "deny", "/approve");
            }
            expect("echo /approve", &policy, "allow", "");
        }
    }

    #[test]
    fn explain_json_shows_each_segment() {
        let policy = policy(Security::Allowlist, Ask::OnMiss, &["/usr/bin/ls"]);
        let eval = run("ls && rm -rf /", &policy);
        let json = explain_json(&eval);
        assert_ne!(json["decision"], "allow");
        assert_eq!(json["decision"], "ask");
        assert_eq!(json["segments"][0]["index"], 1);
        assert_eq!(json["segments"][0]["outcome"], "allowed");
        assert_eq!(json["segments"][0]["rule"], "allowlist: /usr/bin/ls");
        assert_eq!(json["segments"][0]["resolved"], "/usr/bin/ls");
        assert_eq!(json["segments"][1]["index"], 2);
        assert_eq!(json["segments"][1]["outcome"], "missed");
        assert_eq!(
            json["segments"][1]["argv"],
            serde_json::json!(["rm", "-rf", "/"])
        );
        assert_eq!(
            json["segments"][1]["rule"],
            "miss: /usr/bin/rm is not allowlisted"
        );
        assert_eq!(json["plan"]["rebuilt"], false);
        let off = Policy {
            ask: Ask::Off,
            ..policy
        };
        let json = explain_json(&run("ls && rm -rf /", &off));
        assert_eq!(json["decision"], "deny");
        assert!(json["plan"].is_null());
        assert!(json["reason"]
            .as_str()
            .is_some_and(|r| r.contains("segment 2")));
    }

    #[test]
    fn segment_reports_name_the_rule() {
        let policy = Policy {
            ask_patterns: vec!["git push *".into()],
            ..policy(
                Security::Allowlist,
                Ask::OnMiss,
                &["git", "/usr/bin/python3"],
            )
        };
        let eval = run(
            "git status | wc -l && git push && python3 -c x && rm x",
            &policy,
        );
        let rules: Vec<(&str, SegmentOutcome)> = eval
            .segments
            .iter()
            .map(|s| (s.rule.as_str(), s.outcome))
            .collect();
        assert_eq!(
            rules,
            vec![
                ("allowlist: git", SegmentOutcome::Allowed),
                ("safe-bin: wc", SegmentOutcome::Allowed),
                ("ask-pattern: git push *", SegmentOutcome::Ask),
                ("inline-eval: python3 -c", SegmentOutcome::Ask),
                (
                    "miss: /usr/bin/rm is not allowlisted",
                    SegmentOutcome::Missed
                ),
            ]
        );
    }

    #[test]
    fn bare_allowlist_names_only_cover_path_lookups() {
        let policy = policy(Security::Allowlist, Ask::Off, &["git"]);
        expect("git status", &policy, "allow", "");
        expect("/usr/bin/git status", &policy, "deny", "not allowlisted");
        expect("./git status", &policy, "deny", "relative path");
        let safe_bins_off = Policy {
            safe_bins: Vec::new(),
            ..policy.clone()
        };
        expect(
            "wc -l",
            &safe_bins_off,
            "deny",
            "/usr/bin/wc is not allowlisted",
        );
        expect("wc -l", &policy, "allow", "");
    }

    #[test]
    fn configured_safe_bin_profiles_cover_only_their_argv() {
        let mut policy = policy(Security::Allowlist, Ask::Off, &[]);
        policy.safe_bins.push("jq".into());
        policy.safe_bin_profiles.insert(
            "jq".into(),
            crate::policy::BinProfile {
                allowed_flags: vec!["-r".into()],
                value_flags: vec![],
                min_positional: 1,
                max_positional: 1,
                subcommands: vec![],
            },
        );
        let jq = |path: &str| resolver().with("jq", path);
        let rows: &[(&str, &str, &str, &str)] = &[
            (
                "jq -r .a",
                "/usr/bin/jq",
                "allow",
                "safe-bin: jq (configured profile)",
            ),
            (
                "jq .",
                "/usr/bin/jq",
                "allow",
                "safe-bin: jq (configured profile)",
            ),
            (
                "jq -f /dev/stdin",
                "/usr/bin/jq",
                "deny",
                "option -f is not in the profile",
            ),
            (
                "jq . /etc/passwd",
                "/usr/bin/jq",
                "deny",
                "file operand \"/etc/passwd\"",
            ),
            (
                "jq -rc .",
                "/usr/bin/jq",
                "deny",
                "option -rc is not in the profile",
            ),
            // A jq the agent could have written does not borrow the profile.
            ("jq .", "/workspace/bin/jq", "deny", ""),
        ];
        for (command, path, want, rule) in rows {
            let eval = evaluate(&Request::new(command, "/workspace"), &policy, &jq(path));
            assert_eq!(
                eval.decision.as_str(),
                *want,
                "{command} ({path}): {eval:#?}"
            );
            if !rule.is_empty() {
                assert!(
                    eval.segments.iter().any(|s| s.rule.contains(rule)),
                    "{command}: {:#?}",
                    eval.segments
                );
            }
        }
    }

    #[test]
    fn on_the_host_an_allowlisted_program_needs_an_argv_profile() {
        let host = |ask: Ask, allowlist: &[&str]| Policy {
            profiles_required: true,
            ..policy(Security::Allowlist, ask, allowlist)
        };
        let everything = &["/usr/bin/*"];
        // The issue's payloads: allowlisted by path, not one runs unasked on the host.
        for command in [
            "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec='sh -c id'",
            "split --filter=/bin/sh /etc/hosts",
            "setarch -3 /bin/sh",
            "choom -n 0 /bin/sh",
            "run-parts --regex '^sh$' /bin",
            "make",
            "tar -cf /dev/null /etc/hostname",
        ] {
            let eval = run(command, &host(Ask::OnMiss, everything));
            assert_eq!(
                eval.decision.as_str(),
                "ask",
                "{command}: {:?}",
                eval.decision
            );
            let eval = run(command, &host(Ask::Off, everything));
            assert_eq!(
                eval.decision.as_str(),
                "deny",
                "{command}: {:?}",
                eval.decision
            );
        }
        // A program without a profile says how to write one.
        expect(
            "make",
            &host(Ask::OnMiss, &["/usr/bin/make"]),
            "ask",
            "[policy.host.argv_profiles.make]",
        );
        // Built-in read-only profiles pass; their writing options miss.
        for command in [
            "ls -la /etc",
            "date +%s",
            "systemctl status nginx",
            "cat /etc/hostname",
        ] {
            expect(command, &host(Ask::OnMiss, everything), "allow", "");
        }
        expect(
            "date -s 2020-01-01",
            &host(Ask::OnMiss, everything),
            "ask",
            "date -s changes the system",
        );
        expect(
            "systemctl restart nginx",
            &host(Ask::OnMiss, everything),
            "ask",
            "not one of the profile's subcommands",
        );
        // An operator profile makes a program runnable with exactly its argv.
        let mut with_make = host(Ask::OnMiss, &["/usr/bin/make"]);
        with_make.argv_profiles.insert(
            "make".into(),
            crate::policy::BinProfile {
                allowed_flags: vec!["-n".into()],
                max_positional: 1,
                ..Default::default()
            },
        );
        expect("make -n test", &with_make, "allow", "");
        expect(
            "make -C /x test",
            &with_make,
            "ask",
            "option -C is not in the profile",
        );
        // Wrappers that change the machine on their own ask on the host, whatever they run.
        for command in [
            "flock /etc/x ls",
            "nohup ls",
            "chrt -f 99 ls",
            "choom -n -1000 -- ls",
            "ionice -c 1 ls",
            "nice -n -5 ls",
        ] {
            expect(
                command,
                &host(Ask::OnMiss, everything),
                "ask",
                "on the host it needs an operator",
            );
        }
        expect("nice -n 5 ls", &host(Ask::OnMiss, everything), "allow", "");
        expect(
            "timeout 5 ls -la",
            &host(Ask::OnMiss, everything),
            "allow",
            "",
        );
        // In the sandbox the same entries allow any argv but the gadget options.
        let sandbox = policy(Security::Allowlist, Ask::OnMiss, everything);
        expect("make", &sandbox, "allow", "");
        expect("tar -czf a.tgz d", &sandbox, "allow", "");
    }

    #[test]
    fn gadget_options_miss_even_when_allowlisted() {
        let sandbox = policy(Security::Allowlist, Ask::Off, &["/usr/bin/*"]);
        for (command, needle) in [
            (
                "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec=sh",
                "tar --checkpoint-action runs a program",
            ),
            (
                "tar -cf x --checkpoint-act=exec=sh y",
                "--checkpoint-action",
            ),
            ("tar xIf sh a.tar", "tar -I runs a program"),
            ("split --filter=/bin/sh /etc/hosts", "split --filter"),
            ("rg --pre ./p x", "rg --pre runs a program"),
            ("rg -z x", "rg -z"),
            ("sort --compress-program=sh x", "sort --compress-program"),
            (
                "curl --engine ./e.so https://h",
                "curl --engine loads a library",
            ),
            (
                "git ls-remote --upload-pack=sh .",
                "git ls-remote --upload-pack runs",
            ),
            (
                "git ls-remote --upload-pa=sh .",
                "--upload-pack runs a program (as",
            ),
            (
                "git diff --output=/tmp/x",
                "git diff --output writes a file",
            ),
            ("git grep -O x", "git grep -O runs a program"),
            ("git clone -u sh x y", "git clone -u runs"),
            ("nice tar --to-command=sh -xf a", "tar --to-command"),
            (
                "setarch x86_64 tar --to-command=sh -xf a",
                "tar --to-command",
            ),
        ] {
            expect(command, &sandbox, "deny", needle);
        }
    }

    #[test]
    fn wrappers_that_run_their_argument_are_judged_by_it() {
        let only_ls = policy(Security::Allowlist, Ask::Off, &["/usr/bin/ls"]);
        for command in [
            "setarch x86_64 -R ls",
            "linux32 ls",
            "choom -n 0 ls",
            "choom -n 0 -- ls",
            "taskset 0x1 ls",
            "taskset -c 0-1 ls",
            "chrt -o 0 ls",
            "ionice -c 3 ls",
            "flock /tmp/lock ls",
            "nice setarch x86_64 ls",
        ] {
            let eval = expect(command, &only_ls, "allow", "");
            let plan = eval.plan.unwrap().command;
            assert!(plan.contains("'/usr/bin/ls'"), "{command}: {plan}");
        }
        for (command, needle) in [
            (
                "setarch -3 /bin/sh",
                "setarch with option -3 before an architecture",
            ),
            ("setarch x86_64", "without a command starts a shell"),
            ("linux32", "without a command starts a shell"),
            ("setarch x86_64 sh", "/usr/bin/sh is not allowlisted"),
            ("choom -n 0 /bin/sh", "/bin/sh is not allowlisted"),
            (
                "choom -n 0 ls -p 1",
                "choom reads options after its command",
            ),
            ("taskset 1 sh", "/usr/bin/sh is not allowlisted"),
            ("chrt -o x ls", "chrt with unusual operand"),
            ("flock -c id /tmp/l", "flock: denied option -c (--command)"),
            ("flock /tmp/l -c id", "flock -c hands a command to a shell"),
            ("flock /tmp/l --command id", "flock --command hands"),
            (
                "run-parts --regex '^sh$' /bin",
                "run-parts runs other programs",
            ),
        ] {
            expect(command, &only_ls, "deny", needle);
        }
    }

    #[test]
    fn wrappers_must_resolve_to_trusted_dirs() {
        let policy = policy(Security::Allowlist, Ask::Off, &["/usr/bin/ls"]);
        let no_nice = MapResolver::new()
            .with("ls", "/usr/bin/ls")
            .with("nice", "/workspace/nice");
        let eval = evaluate(&Request::new("nice ls", "/"), &policy, &no_nice);
        assert_eq!(eval.decision.as_str(), "deny");
        assert!(eval
            .decision
            .reason()
            .unwrap_or("")
            .contains("wrapper nice"));
        let no_time = MapResolver::new().with("ls", "/usr/bin/ls");
        let eval = evaluate(&Request::new("time ls", "/"), &policy, &no_time);
        assert!(eval
            .decision
            .reason()
            .unwrap_or("")
            .contains("wrapper time: time not found on PATH"));
    }

    #[test]
    fn command_names_lists_what_to_resolve() {
        let rows: &[(&str, &[&str])] = &[
            ("ls -la", &["ls"]),
            ("grep foo | head -5 && git status", &["grep", "head", "git"]),
            ("nice -n 5 env git status", &["nice", "env", "git"]),
            ("command ls", &["ls"]),
            ("time make", &["time", "make"]),
            ("sudo rm x", &["sudo", "rm"]),
            ("./local x; /usr/bin/ls", &[]),
            ("cd /tmp; eval x", &[]),
            ("ls; ls", &["ls"]),
            ("echo \"unterminated", &[]),
            ("$X y", &[]),
        ];
        for (command, want) in rows {
            assert_eq!(command_names(command), *want, "command {command:?}");
        }
    }
}
