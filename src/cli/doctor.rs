//! `moat doctor`: checks the engine, the image, the configuration and this host's disk bound
//! (with `--session`, that session's container against its limits), and says what to fix.

use super::term::say;
use std::process::ExitCode;

use moat::home::Home;
use moat::runtime::Engine;

pub async fn run(home: Home, session: Option<String>) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let config = match moat::config::load(&home.config_file()) {
        Ok((c, source)) => {
            match &source.file {
                Some(file) => say!("ok    config {}", file.display()),
                None => say!(
                    "ok    config: no file at {}, so every key has its default (README, \"Configuration\")",
                    home.config_file().display()
                ),
            }
            if !source.overrides.is_empty() {
                say!("      overridden by {}", source.overrides.join(", "));
            }
            Some(c)
        }
        Err(e) => {
            ok = false;
            say!(
                "FAIL  config: failed to {e}\n      fix the key it names in {}",
                home.config_file().display()
            );
            None
        }
    };
    if let Some(c) = config.as_ref().filter(|c| c.elevated.enabled) {
        ok &= host_user(&c.elevated.user);
    }
    if let Some(c) = &config {
        entry_warnings(c);
        ok &= disk_plan(c);
    }
    if let Some(c) = &config {
        ok &= daemon(&home, c).await;
        super::pool::doctor(&home).await;
    }
    match moat::runtime::docker::DockerRuntime::connect().await {
        Ok(rt) => match rt.ping().await {
            Ok(info) => {
                say!(
                    "ok    docker engine {} (API {})",
                    info.version,
                    info.api_version
                );
                if let (Some(c), Some(s)) = (&config, &session) {
                    ok &= session_health(&rt, c, &home, s).await;
                }
                if let Some(c) = &config {
                    ok &= runtimes(&rt, c).await;
                    egress_note(c);
                    match rt.image_exists(&c.sandbox.image).await {
                        Ok(true) => {
                            say!("ok    image {}", c.sandbox.image);
                            recipe(&rt, &c.sandbox.image).await;
                            ok &= shells(&rt, c).await;
                            transports(&rt, c, &home).await;
                        }
                        Ok(false) => {
                            ok = false;
                            say!(
                                "FAIL  image {} is missing\n      run `moat image build`",
                                c.sandbox.image
                            );
                        }
                        Err(e) => {
                            ok = false;
                            say!("FAIL  image check: failed to {e}");
                        }
                    }
                }
            }
            Err(e) => {
                ok = false;
                say!("FAIL  docker engine: failed to {e}\n      start Docker, or set DOCKER_HOST");
            }
        },
        Err(e) => {
            ok = false;
            say!("FAIL  docker engine: failed to {e}\n      start Docker, or set DOCKER_HOST");
        }
    }
    say!(
        "{}  MOAT_HOME {}",
        if ok { "ok  " } else { "info" },
        home.root().display()
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What the configured allowlist entries trust (docs/policy.md, "What an entry trusts"):
/// information, not a failure.
fn entry_warnings(c: &moat::config::Config) {
    use moat::policy::{policy_warnings, EntryPlace};
    let host = policy_warnings(&c.policy.host, EntryPlace::Host);
    let sandbox = policy_warnings(&c.policy.sandbox, EntryPlace::Sandbox);
    for (key, warning) in host
        .iter()
        .map(|w| ("policy.host", w))
        .chain(sandbox.iter().map(|w| ("policy.sandbox", w)))
    {
        say!(
            "info  {key}.allowlist {}",
            moat::output::escape_display(warning)
        );
    }
}

/// How `sandbox.workspace_max_bytes` is held on this host (docs/security.md, "Disk bound");
/// false when sessions would be refused.
fn disk_plan(c: &moat::config::Config) -> bool {
    use moat::session::disk_image::{Availability, DiskPlan};
    let limit = c.sandbox.workspace_max();
    match DiskPlan::decide(c.sandbox.disk_bound, limit) {
        DiskPlan::Images => {
            say!("ok    disk bound: each session gets its own filesystem of sandbox.workspace_max_bytes; the kernel refuses writes past it");
            true
        }
        DiskPlan::Watch if limit == 0 => {
            say!("info  disk bound: off (sandbox.workspace_max_bytes = 0)");
            true
        }
        DiskPlan::Watch => {
            let why = match Availability::probe() {
                Availability::No(why) if c.sandbox.disk_bound != moat::config::DiskBound::Watch => {
                    format!(" ({why})")
                }
                _ => String::new(),
            };
            say!("info  disk bound: watched, not enforced by the kernel{why}: moat measures each session and ends its processes past the bound, which a fast writer can overshoot (docs/security.md, \"Disk bound\")");
            true
        }
        DiskPlan::Refused(why) => {
            say!("FAIL  disk bound: sandbox.disk_bound = \"image\", but {why}: sessions are refused\n      run moat as root on the host, or set sandbox.disk_bound = \"watch\"");
            false
        }
    }
}

/// `--session`: that session's container against its limits (`session::health`); false when
/// it is wedged or stopped.
async fn session_health(
    rt: &moat::runtime::docker::DockerRuntime,
    c: &moat::config::Config,
    home: &Home,
    session: &str,
) -> bool {
    if let Err(e) = moat::session::validate_key(session) {
        say!("FAIL  session: failed to {e}");
        return false;
    }
    let key = moat::session::container_key(session, c.sandbox.scope);
    let name = moat::session::ContainerName::for_key(&key, &home.root().display().to_string());
    let paths: Vec<String> = c
        .sandbox
        .tmpfs_plan()
        .mounts
        .into_iter()
        .map(|m| m.path)
        .collect();
    let health = moat::session::health::check(rt, &name.name, &paths).await;
    let mut lines = health.lines(session);
    // The disk bound: use now, and the last stop it made (docs/security.md, "Disk bound").
    if health.state.is_some() {
        match moat::store::Store::open(&home.state_db()) {
            Ok(store) => lines.extend(
                moat::disk_guard::doctor_report(
                    rt,
                    &store,
                    &moat::session::disk_image::DiskImage::new(home.root(), &name.slug),
                    (&name.name, &key, session),
                    c.sandbox.workspace_max(),
                )
                .await,
            ),
            Err(e) => lines.push((false, format!("disk bound: failed to {e}"))),
        }
    }
    let mut ok = true;
    for (fine, line) in lines {
        ok &= fine;
        say!("{}  {line}", if fine { "ok  " } else { "FAIL" });
    }
    ok
}

/// Which shell the image's `sh` is, whether it has bash, and so whether `sandbox.shell` can
/// work; false only when the configured shell is missing.
async fn shells(rt: &moat::runtime::docker::DockerRuntime, c: &moat::config::Config) -> bool {
    use moat::config::Shell;
    match moat::image::probe_shells(rt, &c.sandbox.image, &c.sandbox.user).await {
        Ok(s) => {
            let sh = if s.sh.is_empty() { "unknown" } else { &s.sh };
            let bash = s.bash.as_deref().unwrap_or("absent");
            let using = c.sandbox.shell.name();
            if c.sandbox.shell == Shell::Bash && s.bash.is_none() {
                say!("FAIL  image shells: sh is {sh}, bash is absent, but sandbox.shell = \"bash\"\n      install bash in the image, or set sandbox.shell = \"sh\"");
                return false;
            }
            say!("ok    image shells: sh is {sh}, bash is {bash}; commands run with `{using} -lc` (sandbox.shell)");
            true
        }
        Err(e) => {
            say!("warn  image shells: failed to {e}");
            true
        }
    }
}

/// Which transport each running session container's commands take (docs/helper.md): a helper
/// that answers now, or the engine's exec.
async fn transports(
    rt: &moat::runtime::docker::DockerRuntime,
    c: &moat::config::Config,
    home: &Home,
) {
    use moat::runtime::Engine;
    let Ok(containers) = rt.list_containers(moat::session::MOAT_LABEL).await else {
        return;
    };
    let helper = c.sandbox.transport == moat::config::Transport::Helper;
    // Only this home's containers: another home's run directories are not ours to probe.
    let ours = |name: &str| {
        name.strip_prefix("moat-")
            .is_some_and(|slug| home.run_dir(slug).is_dir())
    };
    for info in containers.iter().filter(|i| i.running && ours(&i.name)) {
        let line = if !helper {
            "docker exec (sandbox.transport = \"exec\")"
        } else if moat::runtime::helper::probe(home, &info.name, c.sandbox.uid_gid()).await {
            "the helper"
        } else {
            // Under gVisor a helper's socket left behind is never replaced (docs/helper.md,
            // "Trust"), so the next command does not always start one.
            "docker exec: no helper answers (the next command starts one, except under gVisor once a helper's socket was left behind)"
        };
        say!("ok    {}: commands go through {line}", info.name);
    }
}

/// With host access on, says who host commands run as (docs/security.md, "The operator
/// channel"); false when `elevated.user` cannot work.
fn host_user(spec: &str) -> bool {
    match moat::host::RunAs::resolve(spec) {
        Ok(None) => {
            say!("warn  elevated.user is not set: host commands run as moat's own user and could act on its home, socket and token\n      set elevated.user to an unprivileged account (docs/security.md, \"The operator channel\")");
            true
        }
        Ok(Some(u)) if !nix::unistd::geteuid().is_root() => {
            say!("FAIL  elevated.user (uid {}) needs moat to run as root: this moat is not\n      (a moat given CAP_SETUID and CAP_SETGID works too; this check cannot see those)", u.uid);
            false
        }
        Ok(Some(u)) => {
            say!("ok    host commands run as uid {} gid {}", u.uid, u.gid);
            true
        }
        Err(e) => {
            say!("FAIL  failed to {e}");
            false
        }
    }
}

/// The home's daemon: whether one runs, which, and whether it fits this configuration
/// (docs/ARCHITECTURE.md, "Daemon"). None running is fine: the first command starts one.
async fn daemon(home: &Home, config: &moat::config::Config) -> bool {
    let Some(h) = moat::daemon::status(home).await else {
        say!(
            "ok    daemon: none runs for {} (the first command starts one; it logs to {})",
            home.root().display(),
            home.daemon_log().display()
        );
        return true;
    };
    let origin = if h["autoStarted"] == true {
        "started on demand"
    } else {
        "moat serve"
    };
    let fits = h["fingerprint"].as_str() == Some(moat::daemon::fingerprint(config).as_str());
    if fits {
        say!(
            "ok    daemon: pid {} ({origin}), {} running processes",
            h["pid"],
            h["running"]
        );
    } else {
        say!(
            "WARN  daemon: pid {} ({origin}) runs another moat build or configuration; an idle one is replaced by the next command, a busy one refuses commands until restarted",
            h["pid"]
        );
    }
    true
}

/// The runtimes the engine offers; `sandbox.runtime` must be one of them (docs/security.md,
/// "runc or runsc").
async fn runtimes(rt: &moat::runtime::docker::DockerRuntime, c: &moat::config::Config) -> bool {
    let offered = match rt.runtimes().await {
        Ok(o) => o,
        Err(e) => {
            say!("warn  runtimes: failed to {e}");
            return true;
        }
    };
    let list = offered.join(", ");
    let wanted = &c.sandbox.runtime;
    if !wanted.is_empty() && !offered.iter().any(|r| r == wanted) {
        say!("FAIL  runtimes: the engine offers {list}, but sandbox.runtime = \"{wanted}\"\n      for gVisor run scripts/setup-runsc (installs runsc, registers it, reloads the engine), or clear sandbox.runtime");
        return false;
    }
    let using = if wanted.is_empty() {
        "the engine's default"
    } else {
        wanted.as_str()
    };
    say!("ok    runtimes: {list}; sessions use {using} (sandbox.runtime)");
    if !offered.iter().any(|r| r == "runsc") {
        say!("      gVisor (runsc) is not registered: scripts/setup-runsc adds it");
    }
    true
}

/// What `sandbox.network = "egress"` means for tools in the sandbox.
fn egress_note(c: &moat::config::Config) {
    if c.sandbox.network != moat::egress::container::EGRESS_NETWORK {
        return;
    }
    let e = &c.sandbox.egress;
    say!(
        "ok    network egress: {} allow, {} deny entries, ask {}, proxy leaves through `{}`\n      tools that ignore HTTP_PROXY/HTTPS_PROXY have no route at all (docs/security.md, \"Network egress\")",
        e.allow.len(),
        e.deny.len(),
        e.ask.as_str(),
        e.outbound_network
    );
}

/// Warns when the image is one `moat image build` made from an older recipe: it runs, but
/// lacks what this moat's image carries (README, "The sandbox image").
async fn recipe(rt: &moat::runtime::docker::DockerRuntime, image: &str) {
    let default = moat::config::Config::default().sandbox.image;
    match rt.image_labels(image).await {
        Ok(labels) => {
            if let moat::image::Freshness::Outdated(old) =
                moat::image::freshness(image, labels.as_ref(), &default)
            {
                say!(
                    "warn  image {image} was built from an older recipe ({}) than this moat's ({}): it lacks what this moat's image carries\n      run `moat image build`",
                    old.as_deref().unwrap_or("unlabelled"),
                    moat::image::recipe()
                );
            }
        }
        Err(e) => say!("warn  image recipe: failed to {e}"),
    }
}
