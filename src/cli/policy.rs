//! `moat policy explain`: the verdict `exec` would give a command (docs/policy.md,
//! "Explain").

use super::term::{say, say_err, say_part};
use http::Method;
use std::process::ExitCode;

use moat::home::Home;
use moat::policy::{evaluate_parsed, explain_json, explain_text, MapResolver, Request, Security};

use super::args::{ExplainArgs, PolicyCommand};

pub async fn run(home: Home, cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    let PolicyCommand::Explain(a) = cmd;
    explain(home, a).await
}

async fn explain(home: Home, a: ExplainArgs) -> anyhow::Result<ExitCode> {
    if a.host.trim() != "sandbox" && a.host.trim() != "host" {
        anyhow::bail!("explain for host `{}`: use sandbox or host", a.host);
    }
    if let Some(session) = &a.session {
        let v = judge_in_session(&home, session, &a).await?;
        return show_verdict(&v, &a, None);
    }
    if a.host.trim() == "sandbox" {
        return explain_in_throwaway(&home, &a).await;
    }
    // A host command: names resolve in this machine's trusted directories, exactly where the
    // host executor resolves them.
    let (config, _) = moat::config::load(&home.config_file())?;
    let request = moat::policy::RequestLevels {
        security: a.security.as_deref(),
        ask: a.ask.as_deref(),
    };
    let mut policy = moat::policy::compose(
        &config.policy.host,
        moat::policy::Layers {
            on_host: true,
            request,
            ..Default::default()
        },
    );
    if a.security.as_deref().and_then(Security::parse_lenient) == Some(Security::Allowlist)
        || !a.allow.is_empty()
    {
        // Explaining an allowlist without configuring one is the common case: let flags set it.
        if let Some(s) = a.security.as_deref().and_then(Security::parse_lenient) {
            policy.security = s;
        }
    }
    if !a.allow.is_empty() {
        policy.allowlist = a.allow.clone();
    }
    if !a.safe_bins.is_empty() {
        policy.safe_bins = a.safe_bins.clone();
    }
    policy.validate()?;
    let command = a.command.join(" ");
    home.ensure_root()?;
    let store = moat::store::Store::open(&home.state_db())?;
    let skills = if config.policy.auto_allow_skills {
        moat::skills::states(&config, &store)?
    } else {
        Vec::new()
    };
    let mut env = std::collections::BTreeMap::new();
    for pair in &a.env {
        let Some((key, value)) = pair.split_once('=') else {
            anyhow::bail!("read --env {pair:?}: expected KEY=VALUE");
        };
        env.insert(key.to_string(), value.to_string());
    }
    moat::contract::validate_env(&env)?;
    // The same bounded parse as exec: the same refusals, off this thread, under a deadline.
    let parsed = moat::tools::analyse(&command).await;
    let mut names = parsed.command_names();
    names.extend(moat::skills::names(&skills));
    let words = moat::policy::pattern_words(&parsed)
        .into_iter()
        .chain(moat::policy::source_words(&parsed));
    for word in words {
        if !names.contains(&word) {
            names.push(word);
        }
    }
    let mut resolver = MapResolver::new();
    for name in &names {
        if name.contains('/') {
            let p = std::path::Path::new(&a.cwd).join(name);
            if let Some(real) = moat::tools::real_path(&p) {
                resolver = resolver.with_real(name.clone(), real);
            }
            continue;
        }
        for dir in &policy.trusted_dirs {
            let p = std::path::Path::new(dir).join(name);
            if p.is_file() {
                resolver = resolver.with(name.clone(), p.display().to_string());
                if let Some(real) = moat::tools::real_path(&p) {
                    resolver = resolver.with_real(name.clone(), real);
                }
                break;
            }
        }
    }
    // Enabled skills and the operator's run-time entries, named as the rule that matched.
    policy
        .labeled_allowlist
        .extend(moat::skills::entries(&skills, &resolver));
    for e in store.allowlist_entries(Some("host"))? {
        if e.command.is_none() {
            let rule = format!("allowlist: {} ({} by {})", e.entry, e.source, e.added_by);
            policy.labeled_allowlist.push((e.entry, rule));
        }
    }
    let eval = evaluate_parsed(
        &parsed,
        &Request {
            command: &command,
            cwd: &a.cwd,
            env: &env,
        },
        &policy,
        &resolver,
    );
    if a.json {
        super::term::json_pretty(&explain_json(&eval))?;
    } else {
        say_part!("{}", explain_text(&eval));
        say!("names resolved in: this host's trusted directories, as the host executor resolves them");
    }
    Ok(ExitCode::SUCCESS)
}

/// A sandbox command with no session named: judged in a throwaway session of the configured
/// image, removed afterwards with its directories, so names resolve exactly where an exec's
/// would (docs/policy.md, "Explain").
async fn explain_in_throwaway(home: &Home, a: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let session = format!("explain-{}", &id[..12]);
    // Interrupted or not, the throwaway goes: a Ctrl-C while its sandbox starts must not
    // leave it behind. And it goes before the verdict is printed: a reader that closes the
    // pipe early (`| head`) ends this process at its first write.
    let verdict = super::interrupt::or_interrupt(judge_in_session(home, &session, a)).await?;
    let client = super::daemon::client(home).await?;
    let path = format!("/v1/sessions/{session}?purge=true");
    if let Err(e) = super::daemon::call(&client, Method::DELETE, &path, None).await {
        // The verdict stands; what is left is named so it can be removed by hand.
        say_err!("moat: failed to remove the throwaway session {session}: {e:#} (moat sessions rm {session})");
    }
    match verdict {
        Ok(v) => show_verdict(
            &v?,
            a,
            Some("a throwaway sandbox of the configured image (removed again)"),
        ),
        Err(sig) => {
            say_err!(
                "moat: {}: no verdict; the throwaway sandbox was removed",
                sig.name()
            );
            Ok(sig.exit_code())
        }
    }
}

/// Through the daemon, as `exec` in `session` would judge it: the daemon's answer.
async fn judge_in_session(
    home: &Home,
    session: &str,
    a: &ExplainArgs,
) -> anyhow::Result<serde_json::Value> {
    moat::session::validate_key(session)?;
    let mut env = std::collections::BTreeMap::new();
    for pair in &a.env {
        let Some((key, value)) = pair.split_once('=') else {
            anyhow::bail!("read --env {pair:?}: expected KEY=VALUE");
        };
        env.insert(key.to_string(), value.to_string());
    }
    let req = moat::tools::ExplainRequest {
        command: a.command.join(" "),
        workdir: Some(a.cwd.clone()),
        env,
        security: a.security.clone(),
        ask: a.ask.clone(),
        allow: a.allow.clone(),
        safe_bins: a.safe_bins.clone(),
        host: a.host.trim() == "host",
    };
    let client = super::daemon::client(home).await?;
    let path = format!("/v1/sessions/{session}/explain");
    let v = super::daemon::call(
        &client,
        Method::POST,
        &path,
        Some(&serde_json::to_value(&req)?),
    )
    .await?;
    Ok(v)
}

/// Prints the daemon's verdict `v`. `place` replaces the daemon's account of where names were
/// resolved (a throwaway session's name means nothing to a reader).
fn show_verdict(
    v: &serde_json::Value,
    a: &ExplainArgs,
    place: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let resolved_in = match place {
        Some(p) => serde_json::Value::from(p),
        None => v["resolvedIn"].clone(),
    };
    if a.json {
        let mut out = v["explain"].clone();
        out["resolvedIn"] = resolved_in;
        super::term::json_pretty(&out)?;
    } else {
        say_part!("{}", v["text"].as_str().unwrap_or_default());
        say!(
            "names resolved in: {}",
            resolved_in.as_str().unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
