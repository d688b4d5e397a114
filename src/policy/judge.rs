//! The verdict for one call, from one parse: the evaluation, then the rules that sit on top of
//! it — an exact command an operator allowed for good, a host run that touches a directory a
//! sandbox can write, and what an approval would cover if nobody were asked
//! (docs/approvals.md, "Files a plan runs" and "Directories a sandbox can write"). The tools
//! layer gathers the inputs (the stored exact entries, the writable roots, both I/O) and acts
//! on the result.

use super::{evaluate_parsed, Ask, Decision, Evaluation, Parsed, Plan, Policy, Request, Resolver};

/// What the caller found out about this command before judging it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// An operator allowed exactly this command, in this session and working directory, for
    /// good (an `=command:<sha256>` entry).
    pub exact_allowed: bool,
}

/// Judges `parsed` under `policy`, with `standing` applied. An exact allowance passes where
/// the allowlist alone would miss, never past a denied segment, a parsing bound, `ask =
/// always`, a refused request variable, or inline eval (which asks every time).
pub fn judge(
    parsed: &Parsed,
    req: &Request,
    policy: &Policy,
    resolver: &dyn Resolver,
    standing: Standing,
) -> Evaluation {
    let mut eval = evaluate_parsed(parsed, req, policy, resolver);
    // Only a miss refused because nobody is asked can be overridden; a deny pattern (also one
    // found inside a substitution), a privilege wrapper or a refused env name cannot.
    let refused_outright = match &eval.decision {
        Decision::Allow | Decision::Ask { .. } => false,
        Decision::Deny { reason } => {
            eval.segments.is_empty()
                || !reason.starts_with("allowlist miss: ")
                || eval
                    .segments
                    .iter()
                    .any(|s| s.outcome == super::SegmentOutcome::Denied)
        }
    };
    if standing.exact_allowed
        && parsed.refusal().is_none()
        && eval.inline_eval.is_empty()
        && super::env_findings(req.env, policy).is_empty()
        && !refused_outright
        && eval.decision != Decision::Allow
        && policy.ask != Ask::Always
    {
        eval.decision = Decision::Allow;
        if eval.plan.is_none() {
            eval.plan = Some(Plan {
                command: req.command.to_string(),
                rebuilt: false,
                segments: Vec::new(),
            });
        }
    }
    eval
}

/// A run that must ask every time (`why`: it touches a directory a sandbox can write) is not
/// allowed outright; with `ask = off` nobody is asked, so it is refused.
pub fn must_ask(mut eval: Evaluation, why: Option<String>, ask: Ask) -> Evaluation {
    let Some(why) = why else { return eval };
    if let Decision::Allow | Decision::Ask { .. } = eval.decision {
        let reason = match eval.decision {
            Decision::Ask { reason } => format!("{reason}; {why}"),
            _ => why,
        };
        eval.decision = if ask == Ask::Off {
            Decision::Deny { reason }
        } else {
            Decision::Ask { reason }
        };
    }
    eval
}

/// Whether the allowlist (with `standing`) would let the command run if nobody were asked:
/// what `approvals.ask_fallback = "allowlist"` runs when an approval expires. A run that must
/// ask anyway (see [`must_ask`]) is never covered.
pub fn covered(
    parsed: &Parsed,
    req: &Request,
    policy: &Policy,
    resolver: &dyn Resolver,
    standing: Standing,
    must_ask_anyway: bool,
) -> bool {
    let quiet = Policy {
        ask: Ask::Off,
        ..policy.clone()
    };
    !must_ask_anyway && judge(parsed, req, &quiet, resolver, standing).decision == Decision::Allow
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::policy::{analyse, MapResolver, Security};

    fn allowlist(ask: Ask) -> Policy {
        Policy {
            security: Security::Allowlist,
            ask,
            allowlist: vec!["/usr/bin/ls".into()],
            ..Policy::default()
        }
    }

    fn resolver() -> MapResolver {
        MapResolver::new()
            .with("ls", "/usr/bin/ls")
            .with("rm", "/usr/bin/rm")
            .with("python3", "/usr/bin/python3")
    }

    fn verdict(command: &str, policy: &Policy, env: &[(&str, &str)], exact: bool) -> String {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let parsed = analyse(command);
        let req = Request {
            command,
            cwd: "/workspace",
            env: &env,
        };
        let standing = Standing {
            exact_allowed: exact,
        };
        match judge(&parsed, &req, policy, &resolver(), standing).decision {
            Decision::Allow => "allow".into(),
            Decision::Ask { .. } => "ask".into(),
            Decision::Deny { .. } => "deny".into(),
        }
    }

    #[test]
    fn an_exact_allowance_passes_only_a_plain_miss() {
        let off = allowlist(Ask::Off);
        let miss = allowlist(Ask::OnMiss);
        let always = allowlist(Ask::Always);
        type Row<'a> = (&'a str, &'a Policy, &'a [(&'a str, &'a str)], bool, &'a str);
        let rows: [Row; 9] = [
            ("rm -f x", &off, &[], false, "deny"),
            ("rm -f x", &off, &[], true, "allow"),
            ("rm -f x", &miss, &[], false, "ask"),
            ("rm -f x", &miss, &[], true, "allow"),
            // ask = always asks whatever an operator allowed before.
            ("rm -f x", &always, &[], true, "ask"),
            // Inline eval asks every time: nobody looked at the code it runs.
            ("python3 -c 'print(1)'", &miss, &[], true, "ask"),
            // A request variable the allowlist refuses is never overridden.
            ("rm -f x", &off, &[("LD_PRELOAD", "/x.so")], true, "deny"),
            // Allowed anyway: the standing changes nothing.
            ("ls", &off, &[], true, "allow"),
            ("ls", &off, &[], false, "allow"),
        ];
        for (command, policy, env, exact, want) in rows {
            assert_eq!(
                verdict(command, policy, env, exact),
                want,
                "{command} exact={exact} ask={:?}",
                policy.ask
            );
        }
    }

    #[test]
    fn a_writable_reason_turns_allow_into_ask_or_deny() {
        let allow = Evaluation {
            decision: Decision::Allow,
            segments: Vec::new(),
            plan: None,
            inline_eval: Vec::new(),
        };
        let why = || Some("the workdir is writable".to_string());
        let rows = [
            (Ask::OnMiss, why(), "ask"),
            (Ask::Off, why(), "deny"),
            (Ask::Always, why(), "ask"),
            (Ask::Off, None, "allow"),
        ];
        for (ask, why, want) in rows {
            let got = match must_ask(allow.clone(), why, ask).decision {
                Decision::Allow => "allow",
                Decision::Ask { .. } => "ask",
                Decision::Deny { .. } => "deny",
            };
            assert_eq!(got, want, "{ask:?}");
        }
        let denied = Evaluation {
            decision: Decision::Deny {
                reason: "no".into(),
            },
            ..allow
        };
        let kept = must_ask(denied, Some("w".into()), Ask::OnMiss);
        assert_eq!(
            kept.decision,
            Decision::Deny {
                reason: "no".into()
            }
        );
    }

    #[test]
    fn covered_is_the_verdict_with_nobody_asked() {
        let miss = allowlist(Ask::OnMiss);
        let env = BTreeMap::new();
        let rows = [
            ("ls", false, true),
            ("rm -f x", false, false),
            ("rm -f x", true, true),
            ("ls && rm -f x", false, false),
        ];
        for (command, exact, want) in rows {
            let parsed = analyse(command);
            let req = Request {
                command,
                cwd: "/workspace",
                env: &env,
            };
            let standing = Standing {
                exact_allowed: exact,
            };
            assert_eq!(
                covered(&parsed, &req, &miss, &resolver(), standing, false),
                want,
                "{command}"
            );
            assert!(!covered(&parsed, &req, &miss, &resolver(), standing, true));
        }
    }
}
