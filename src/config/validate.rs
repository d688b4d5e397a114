//! Refuses settings that would break the sandbox, at load time, naming the key to change.
//!
//! Bind sources are checked after resolving symlinks, and also as *parents*: mounting `/home`
//! would expose `~/.ssh` just as surely as mounting `~/.ssh` itself.

use std::path::{Path, PathBuf};

use super::{parse_size, Config, ConfigError};

/// Host paths never mounted into a sandbox (or any directory containing one of them).
const FORBIDDEN_ROOTS: &[&str] = &[
    "/", "/etc", "/proc", "/sys", "/dev", "/root", "/boot", "/run", "/var/run",
];
/// Per-user secrets, relative to the home directory.
const FORBIDDEN_HOME: &[&str] = &[".ssh", ".aws", ".docker", ".gnupg", ".config"];

/// The smallest nonzero `sandbox.workspace_max_bytes`: below it ordinary output trips it.
const MIN_WORKSPACE_MAX: u64 = 64 << 20;

pub fn validate(config: &Config, home: Option<&Path>) -> Result<(), ConfigError> {
    let s = &config.sandbox;
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        key: key.to_string(),
        message,
    };
    if s.image.trim().is_empty() {
        return Err(invalid("sandbox.image", "the image name is empty".into()));
    }
    let net = s.network.trim().to_ascii_lowercase();
    if net == "host" || net.starts_with("container:") {
        return Err(invalid(
            "sandbox.network",
            format!("network `{}` shares a network stack with the host or another container; use `none` or a bridge network", s.network),
        ));
    }
    // Egress entries are read once here, so a typo names its key at load, not at the first
    // connection (docs/security.md, "Network egress").
    for (key, entries) in [
        ("sandbox.egress.allow", &s.egress.allow),
        ("sandbox.egress.deny", &s.egress.deny),
    ] {
        for entry in entries {
            crate::egress::Rule::parse(entry).map_err(|e| invalid(key, e.to_string()))?;
        }
    }
    let out = s.egress.outbound_network.trim().to_ascii_lowercase();
    if out.is_empty()
        || out == "none"
        || out == "host"
        || out == "egress"
        || out.starts_with("container:")
    {
        return Err(invalid(
            "sandbox.egress.outbound_network",
            format!("`{}` is not a network the proxy can reach the outside through; use `bridge` or a user-defined network", s.egress.outbound_network),
        ));
    }
    for server in &s.egress.dns {
        if server.trim().parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(
                "sandbox.egress.dns",
                format!("`{server}` is not an IP address (the engine takes resolvers by address)"),
            ));
        }
    }
    for (key, value) in [
        ("sandbox.seccomp_profile", &s.seccomp_profile),
        ("sandbox.apparmor_profile", &s.apparmor_profile),
    ] {
        if value.trim().eq_ignore_ascii_case("unconfined") {
            return Err(invalid(key, "`unconfined` switches the profile off".into()));
        }
    }
    parse_size(&s.memory).map_err(|m| invalid("sandbox.memory", m))?;
    let disk = parse_size(&s.workspace_max_bytes)
        .map_err(|m| invalid("sandbox.workspace_max_bytes", m))?;
    if disk != 0 && disk < MIN_WORKSPACE_MAX {
        return Err(invalid(
            "sandbox.workspace_max_bytes",
            format!("`{}` is below the minimum of 64m (each running process's log alone may keep exec.spill_max_bytes); use 0 for no bound", s.workspace_max_bytes),
        ));
    }
    parse_size(&config.exec.spill_max_bytes).map_err(|m| invalid("exec.spill_max_bytes", m))?;
    if s.pids_limit <= 0 {
        return Err(invalid("sandbox.pids_limit", "must be at least 1".into()));
    }
    if s.cpus < 0.0 || !s.cpus.is_finite() {
        return Err(invalid(
            "sandbox.cpus",
            "must be 0 (unlimited) or positive".into(),
        ));
    }
    let mut ids = s.user.splitn(2, ':');
    let uid_ok = ids.next().is_some_and(|u| u.parse::<u32>().is_ok());
    let gid_ok = ids.next().is_none_or(|g| g.parse::<u32>().is_ok());
    if !uid_ok || !gid_ok {
        return Err(invalid(
            "sandbox.user",
            format!("`{}` is not a numeric uid[:gid]", s.user),
        ));
    }
    for entry in &s.path_prepend {
        if !entry.starts_with('/') || entry.contains(':') {
            return Err(invalid(
                "sandbox.path_prepend",
                format!("`{entry}` must be an absolute container path without `:`"),
            ));
        }
    }
    // tmpfs pages count against the memory limit: every mount is sized inside it
    // (docs/security.md, "Sandbox limits").
    let memory = parse_size(&s.memory).unwrap_or(0);
    super::tmpfs_plan(memory, &s.tmpfs_max_bytes, &s.tmpfs)
        .map_err(|e| invalid(e.key, e.message))?;
    for cap in &s.cap_add {
        let c = cap.trim().to_ascii_uppercase();
        if c == "ALL" || c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN" {
            return Err(invalid(
                "sandbox.cap_add",
                format!("`{cap}` gives the sandbox control of the host kernel"),
            ));
        }
        // The egress wall is the sandbox's routes and addresses: a sandbox that may change
        // them, or write raw frames past them, is not walled (docs/security.md, "Network
        // egress").
        let name = c.strip_prefix("CAP_").unwrap_or(&c);
        if net == crate::egress::container::EGRESS_NETWORK
            && (name == "NET_ADMIN" || name == "NET_RAW")
        {
            return Err(invalid(
                "sandbox.cap_add",
                format!("`{cap}` lets an egress sandbox change its routes or send raw frames past its proxy; drop it or use another sandbox.network"),
            ));
        }
    }
    for bind in &s.binds {
        check_bind(bind, home).map_err(|m| invalid("sandbox.binds", m))?;
    }
    config
        .policy
        .sandbox
        .validate()
        .map_err(|e| invalid("policy.sandbox", e.to_string()))?;
    let serve = &config.serve;
    if !serve.tcp.is_empty() && serve.tcp.parse::<std::net::SocketAddr>().is_err() {
        return Err(invalid(
            "serve.tcp",
            format!("`{}` is not an address such as 127.0.0.1:7878", serve.tcp),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, a) in serve.agents.iter().enumerate() {
        let key = format!("serve.agents[{i}]");
        if a.token.len() < 16 {
            return Err(invalid(&key, "token must be at least 16 characters".into()));
        }
        if a.token == serve.operator_token || !seen.insert(a.token.as_str()) {
            return Err(invalid(
                &key,
                "token is already used by another identity".into(),
            ));
        }
        crate::session_key::validate_key(&a.session).map_err(|e| invalid(&key, e.to_string()))?;
    }
    for (key, value, range) in [
        (
            "serve.max_connections_per_token",
            serve.max_connections_per_token,
            1..=100_000,
        ),
        (
            "serve.max_streams_per_token",
            serve.max_streams_per_token,
            1..=100_000,
        ),
        ("serve.operator_reserve", serve.operator_reserve, 1..=10_000),
        (
            "serve.max_connections",
            serve.max_connections,
            0..=1_000_000,
        ),
        ("serve.max_streams", serve.max_streams, 0..=1_000_000),
        (
            "serve.idle_exit_secs",
            serve.idle_exit_secs.min(u32::MAX as u64) as u32,
            1..=604_800,
        ),
    ] {
        if !range.contains(&value) {
            return Err(invalid(
                key,
                format!("{value} is outside [{}, {}]", range.start(), range.end()),
            ));
        }
    }
    if !serve.operator_token.is_empty() && serve.operator_token.len() < 16 {
        return Err(invalid(
            "serve.operator_token",
            "must be at least 16 characters".into(),
        ));
    }
    config
        .policy
        .host
        .validate()
        .map_err(|e| invalid("policy.host", e.to_string()))?;
    validate_sections(config)?;
    config
        .e2b
        .check()
        .map_err(|(key, message)| ConfigError::Invalid { key, message })?;
    config
        .node
        .check()
        .map_err(|(key, message)| ConfigError::Invalid { key, message })?;
    let default_node = config.exec.node.trim();
    let name_chars = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !default_node.is_empty()
        && (default_node.len() > 32 || !default_node.bytes().all(name_chars))
    {
        return Err(invalid(
            "exec.node",
            format!("`{default_node}` is not a node name (1 to 32 of A-Z a-z 0-9 _ -)"),
        ));
    }
    if !(60..=10_800).contains(&config.process.ttl_secs) {
        return Err(invalid(
            "process.ttl_secs",
            format!("{} is outside [60, 10800] seconds", config.process.ttl_secs),
        ));
    }
    Ok(())
}

/// `[elevated]`, `[approvals]`, `[secrets.*]`, `[skills.*]`.
fn validate_sections(config: &Config) -> Result<(), ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid { key, message };
    config.pool.validate()?;
    for entry in &config.elevated.path_prepend {
        if !entry.starts_with('/') || entry.contains(':') {
            return Err(invalid(
                "elevated.path_prepend".into(),
                format!("`{entry}` must be an absolute host path without `:`"),
            ));
        }
    }
    for name in &config.elevated.env_allow {
        crate::host::check_operator_name(name)
            .map_err(|m| invalid("elevated.env_allow".into(), m))?;
    }
    let wd = &config.elevated.workdir;
    if !wd.is_empty() && (!wd.starts_with('/') || wd.split('/').any(|c| c == "..")) {
        return Err(invalid(
            "elevated.workdir".into(),
            format!("`{wd}` must be an absolute host path without `..`"),
        ));
    }
    for dir in &config.elevated.allowed_workdirs {
        if !dir.starts_with('/') || dir.split('/').any(|c| c == "..") || dir.contains('\0') {
            return Err(invalid(
                "elevated.allowed_workdirs".into(),
                format!("`{dir}` must be an absolute host path without `..`"),
            ));
        }
    }
    for (provider, ids) in &config.elevated.allow_from {
        if ids.iter().any(|i| i.trim().is_empty()) {
            return Err(invalid(
                format!("elevated.allow_from.{provider}"),
                "sender ids must not be empty".into(),
            ));
        }
    }
    if !(1..=10_000).contains(&config.approvals.max_pending_per_session) {
        return Err(invalid(
            "approvals.max_pending_per_session".into(),
            format!(
                "{} is outside [1, 10000]",
                config.approvals.max_pending_per_session
            ),
        ));
    }
    if config.approvals.timeout_secs == 0 {
        return Err(invalid(
            "approvals.timeout_secs".into(),
            "must be at least 1".into(),
        ));
    }
    for (name, secret) in &config.secrets {
        let key = |k: &str| format!("secrets.{name}{k}");
        let mut chars = name.chars();
        let name_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("MOAT_");
        if !name_ok {
            return Err(invalid(
                key(""),
                "the name is the env var it is injected as: ^[A-Za-z_][A-Za-z0-9_]*$, not MOAT_*"
                    .into(),
            ));
        }
        if secret.env.is_empty() == secret.file.is_empty() {
            return Err(invalid(
                key(""),
                "set exactly one of `env` and `file`".into(),
            ));
        }
        if !secret.file.is_empty() && !secret.file.starts_with('/') {
            return Err(invalid(key(".file"), "must be an absolute path".into()));
        }
        for h in &secret.hosts {
            let h = h.trim().to_ascii_lowercase();
            if h != "sandbox" && h != "host" {
                return Err(invalid(
                    key(".hosts"),
                    format!("`{h}` is not sandbox or host"),
                ));
            }
        }
        if let Some(why) = secret.splits_containers(config.sandbox.scope) {
            return Err(invalid(key(".sessions"), why));
        }
    }
    check_exec_strings(config)?;
    for (name, skill) in &config.skills {
        for bin in &skill.bins {
            let plain = !bin.is_empty()
                && bin
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+-/".contains(c))
                && !bin.starts_with('-')
                && (!bin.contains('/') || bin.starts_with('/'))
                && !bin.split('/').any(|c| c == "." || c == "..");
            if !plain {
                return Err(invalid(
                    format!("skills.{name}.bins"),
                    format!("`{bin}` is not a plain command name or absolute path"),
                ));
            }
        }
    }
    Ok(())
}

/// Settings that reach a command as one exec argument or environment string must fit in one
/// (docs/security.md, "Bounds on what one exec carries"): past it every exec, or the session's
/// set-up, would fail inside the engine instead of at load.
fn check_exec_strings(config: &Config) -> Result<(), ConfigError> {
    let too_long = |key: String, len: usize| {
        ConfigError::Invalid {
        key,
        message: format!(
            "{len} bytes do not fit in the {} bytes one exec argument or environment string may carry on Linux (MAX_ARG_STRLEN)",
            crate::contract::MAX_ARG_BYTES
        ),
    }
    };
    let s = &config.sandbox;
    if !crate::contract::fits_one_argument(s.setup_command.len()) {
        return Err(too_long(
            "sandbox.setup_command".into(),
            s.setup_command.len(),
        ));
    }
    for (name, value) in &s.env {
        let len = name.len() + 1 + value.len();
        if !crate::contract::fits_one_argument(len) {
            return Err(too_long(format!("sandbox.env.{name}"), len));
        }
    }
    for (key, dirs) in [
        ("sandbox.path_prepend", &s.path_prepend),
        ("elevated.path_prepend", &config.elevated.path_prepend),
    ] {
        let len = "MOAT_PATH_PREPEND=".len() + dirs.join(":").len();
        if !crate::contract::fits_one_argument(len) {
            return Err(too_long(key.into(), len));
        }
    }
    Ok(())
}

fn check_bind(bind: &str, home: Option<&Path>) -> Result<(), String> {
    let mut parts = bind.split(':');
    let (Some(source), Some(target)) = (parts.next(), parts.next()) else {
        return Err(format!("`{bind}` is not `host:container[:ro]`"));
    };
    if let Some(mode) = parts.next() {
        if mode != "ro" && mode != "rw" {
            return Err(format!("`{bind}`: mode `{mode}` is not ro or rw"));
        }
    }
    if !source.starts_with('/') || !target.starts_with('/') {
        return Err(format!("`{bind}`: both paths must be absolute"));
    }
    if target.contains("docker.sock") {
        return Err(format!("`{bind}` would hand the sandbox the Docker engine"));
    }
    check_host_path(source, home).map_err(|why| format!("`{bind}` {why}"))
}

/// The refusals every host directory handed to a sandbox goes through, a `sandbox.binds`
/// source as much as a session's `--workspace` (docs/security.md, "Host workspaces"): the
/// Docker socket, the system's directories, the user's secret directories,
/// any directory containing one of them, and symlinks to any of these. The error completes
/// "`PATH` …".
pub fn check_host_path(source: &str, home: Option<&Path>) -> Result<(), String> {
    if !source.starts_with('/') {
        return Err("is not an absolute path".into());
    }
    if source.contains("docker.sock") {
        return Err("would hand the sandbox the Docker engine".into());
    }
    // Check the path as written and as the kernel resolves it (a symlink can point anywhere).
    let mut candidates = vec![lexical_normalize(Path::new(source))];
    if let Ok(real) = std::fs::canonicalize(source) {
        candidates.push(real);
    }
    let mut forbidden: Vec<PathBuf> = FORBIDDEN_ROOTS.iter().map(PathBuf::from).collect();
    if let Some(home) = home {
        forbidden.extend(FORBIDDEN_HOME.iter().map(|d| home.join(d)));
    }
    for cand in &candidates {
        if cand.ends_with("docker.sock") {
            return Err("would hand the sandbox the Docker engine".into());
        }
        for bad in &forbidden {
            // The bind exposes `bad` if it is `bad`, lies inside it, or contains it.
            let exposes = cand == bad
                || (bad != Path::new("/") && (cand.starts_with(bad) || bad.starts_with(cand)));
            let exposes = exposes || (bad == Path::new("/") && cand == Path::new("/"));
            if exposes {
                return Err(format!("exposes {} to the sandbox", bad.display()));
            }
        }
    }
    Ok(())
}

/// Resolves `.` and `..` without touching the disk.
fn lexical_normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds() {
        let home = Path::new("/home/alice");
        let rows: &[(&str, bool)] = &[
            ("/srv/data:/data", true),
            ("/srv/data:/data:ro", true),
            ("/:/host", false),
            ("/etc:/etc", false),
            ("/etc/ssl:/ssl:ro", false),
            ("/proc:/p", false),
            ("/sys/fs:/s", false),
            ("/dev:/dev", false),
            ("/root:/r", false),
            ("/boot:/b", false),
            ("/run:/r", false),
            ("/var/run:/vr", false),
            ("/var/run/docker.sock:/var/run/docker.sock", false),
            ("/srv/docker.sock:/x", false),
            ("/home/alice/.ssh:/k", false),
            ("/home/alice/.aws/credentials:/c", false),
            ("/home/alice/.docker:/d", false),
            ("/home/alice/.gnupg:/g", false),
            ("/home/alice/.config:/c", false),
            // A parent of a secret directory exposes it.
            ("/home/alice:/h", false),
            ("/home:/h", false),
            ("/srv/../etc:/e", false),
            ("/home/alice/project:/p", true),
            ("relative:/x", false),
            ("/srv:/x:rx", false),
            ("/srv", false),
        ];
        for (bind, ok) in rows {
            assert_eq!(check_bind(bind, Some(home)).is_ok(), *ok, "bind {bind}");
        }
    }

    #[test]
    fn bind_through_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("innocent");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        let bind = format!("{}:/x", link.display());
        let err = check_bind(&bind, None).unwrap_err();
        assert!(err.contains("/etc"), "{err}");
    }

    #[test]
    fn dangerous_settings_name_their_key() {
        type Mutation = fn(&mut Config);
        let cases: Vec<(Mutation, &str)> = vec![
            (|c| c.sandbox.network = "host".into(), "sandbox.network"),
            (
                |c| c.sandbox.egress.allow = vec!["py*.org".into()],
                "sandbox.egress.allow",
            ),
            (
                |c| c.sandbox.egress.deny = vec!["x.org:0".into()],
                "sandbox.egress.deny",
            ),
            (
                |c| {
                    c.sandbox.network = "egress".into();
                    c.sandbox.cap_add = vec!["cap_net_raw".into()];
                },
                "sandbox.cap_add",
            ),
            (
                |c| c.sandbox.egress.dns = vec!["dns.example".into()],
                "sandbox.egress.dns",
            ),
            (
                |c| c.sandbox.egress.outbound_network = "host".into(),
                "sandbox.egress.outbound_network",
            ),
            (
                |c| c.sandbox.network = "container:abc".into(),
                "sandbox.network",
            ),
            (
                |c| c.sandbox.seccomp_profile = "unconfined".into(),
                "sandbox.seccomp_profile",
            ),
            (
                |c| c.sandbox.apparmor_profile = "Unconfined".into(),
                "sandbox.apparmor_profile",
            ),
            (
                |c| c.sandbox.binds = vec!["/etc:/etc".into()],
                "sandbox.binds",
            ),
            (|c| c.sandbox.user = "root".into(), "sandbox.user"),
            (|c| c.sandbox.memory = "lots".into(), "sandbox.memory"),
            (
                |c| c.sandbox.workspace_max_bytes = "ten gigs".into(),
                "sandbox.workspace_max_bytes",
            ),
            (
                |c| c.sandbox.workspace_max_bytes = "1m".into(),
                "sandbox.workspace_max_bytes",
            ),
            (|c| c.sandbox.pids_limit = 0, "sandbox.pids_limit"),
            (
                |c| c.sandbox.tmpfs_max_bytes = "all".into(),
                "sandbox.tmpfs_max_bytes",
            ),
            (
                |c| c.sandbox.tmpfs_max_bytes = "2g".into(),
                "sandbox.tmpfs_max_bytes",
            ),
            (
                |c| c.sandbox.tmpfs = vec!["/tmp:3g".into()],
                "sandbox.tmpfs",
            ),
            (
                |c| c.sandbox.cap_add = vec!["SYS_ADMIN".into()],
                "sandbox.cap_add",
            ),
            (
                |c| c.sandbox.path_prepend = vec!["rel/bin".into()],
                "sandbox.path_prepend",
            ),
            (|c| c.process.ttl_secs = 5, "process.ttl_secs"),
            (
                |c| c.elevated.path_prepend = vec!["bin".into()],
                "elevated.path_prepend",
            ),
            (|c| c.approvals.timeout_secs = 0, "approvals.timeout_secs"),
            // Past what one exec argument or env string carries (docs/security.md).
            (
                |c| c.sandbox.setup_command = "x".repeat(128 * 1024),
                "sandbox.setup_command",
            ),
            (
                |c| {
                    c.sandbox.env.insert("BIG".into(), "v".repeat(200 * 1024));
                },
                "sandbox.env.BIG",
            ),
            (
                |c| c.sandbox.path_prepend = vec![format!("/{}", "d".repeat(1000)); 140],
                "sandbox.path_prepend",
            ),
            (
                |c| c.elevated.env_allow = vec!["TAR_OPTIONS".into()],
                "elevated.env_allow",
            ),
            (
                |c| c.elevated.env_allow = vec!["LD_PRELOAD".into()],
                "elevated.env_allow",
            ),
            // Names only the policy's list held before the two shared one table: man runs
            // MANPAGER, cargo runs RUSTDOC, an interactive shell expands PS1.
            (
                |c| c.elevated.env_allow = vec!["MANPAGER".into()],
                "elevated.env_allow",
            ),
            (
                |c| c.elevated.env_allow = vec!["RUSTDOC".into()],
                "elevated.env_allow",
            ),
            (
                |c| c.elevated.env_allow = vec!["PS1".into()],
                "elevated.env_allow",
            ),
            (
                |c| c.elevated.env_allow = vec!["MAKELEVEL".into()],
                "elevated.env_allow",
            ),
            (
                |c| c.elevated.allowed_workdirs = vec!["srv/build".into()],
                "elevated.allowed_workdirs",
            ),
            (
                |c| c.elevated.allowed_workdirs = vec!["/srv/../etc".into()],
                "elevated.allowed_workdirs",
            ),
            (
                |c| c.elevated.workdir = "relative/dir".into(),
                "elevated.workdir",
            ),
            (
                |c| c.approvals.max_pending_per_session = 0,
                "approvals.max_pending_per_session",
            ),
            (
                |c| c.serve.max_connections_per_token = 0,
                "serve.max_connections_per_token",
            ),
            (
                |c| c.serve.max_streams_per_token = 0,
                "serve.max_streams_per_token",
            ),
            (|c| c.serve.operator_reserve = 0, "serve.operator_reserve"),
            (
                |c| {
                    c.secrets.insert("BAD-NAME".into(), Default::default());
                },
                "secrets.BAD-NAME",
            ),
            (
                |c| {
                    c.secrets.insert("TOKEN".into(), Default::default());
                },
                "secrets.TOKEN",
            ),
            (
                |c| {
                    let s = crate::config::SecretConfig {
                        env: "X".into(),
                        hosts: vec!["moon".into()],
                        ..Default::default()
                    };
                    c.secrets.insert("TOKEN".into(), s);
                },
                "secrets.TOKEN.hosts",
            ),
            (
                |c| {
                    let s = crate::config::SkillConfig {
                        bins: vec!["../jq".into()],
                        enabled: true,
                    };
                    c.skills.insert("json".into(), s);
                },
                "skills.json.bins",
            ),
        ];
        for (mutate, key) in cases {
            let mut c = Config::default();
            mutate(&mut c);
            match validate(&c, None) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: expected Invalid, got {other:?}"),
            }
        }
        assert!(validate(&Config::default(), None).is_ok());
    }
}
