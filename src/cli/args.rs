//! The command line's grammar (clap): every subcommand, its flags and their help.

use clap::{Args, Parser, Subcommand};

/// moat: run agent commands in per-session Docker sandboxes.
#[derive(Parser, Debug)]
#[command(name = "moat", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Each subcommand's flags are added only when that subcommand is parsed (or its help is
// shown): `moat exec` runs once per agent command, and building every other subcommand's
// flags first cost it about a tenth of its own work (docs/ARCHITECTURE.md, "Daemon").
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum Command {
    /// Run a shell command in a session's sandbox.
    Exec(ExecArgs),
    /// Follow up on background processes (list, poll, log, write, send-keys, kill, …).
    Process(ProcessArgs),
    /// List or remove session containers.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Build the sandbox image.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Explain what the policy decides for a command.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Check the engine, the image and the config, and say what to fix.
    Doctor {
        /// Also report this session's container: state, memory, processes, tmpfs, wedged.
        #[arg(long)]
        session: Option<String>,
    },
    /// Show the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Follow a session's events (background exits, approvals).
    Events {
        #[arg(long, env = "MOAT_SESSION", default_value = "main")]
        session: String,
    },
    /// Serve the HTTP API on $MOAT_HOME/moat.sock (and TCP with tokens).
    Serve(ServeArgs),
    /// The home's daemon (`moat serve`): what runs and what it owns, or stop it.
    #[command(subcommand)]
    Daemon(DaemonCommand),
    /// Measure exec latency, cold start and output throughput against plain docker.
    Bench(BenchArgs),
    /// Serve the exec and process tools to an MCP client over stdio.
    Mcp(McpArgs),
    /// Pending and decided approvals: list, show, approve, deny (operator only).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Allowlist entries added at run time (allow-always, or by hand).
    #[command(subcommand)]
    Allowlist(AllowlistCommand),
    /// Skills: named sets of binaries that enabling allowlists.
    #[command(subcommand)]
    Skills(SkillsCommand),
    /// Run one command in a fresh session for CI: output streamed live, exit code passed on,
    /// the session removed afterwards.
    Run(RunArgs),
    /// This moat as a remote node: its certificate's fingerprint, the tokens it issued to
    /// gateways (docs/nodes.md).
    #[command(subcommand)]
    Node(NodeCommand),
    /// The remote nodes this moat paired with: add, list, remove (docs/nodes.md).
    #[command(subcommand)]
    Nodes(NodesCommand),
    /// Run a session's egress proxy (moat starts it in the session's proxy container).
    #[command(hide = true)]
    EgressProxy {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0:3128")]
        listen: String,
        /// The daemon's control socket for this session.
        #[arg(long)]
        control: std::path::PathBuf,
        /// Subnets (CIDR, comma-separated) whose clients are served: the session's network.
        #[arg(long)]
        peers: String,
    },
    /// An interactive login shell in a session's container (operators), with the same user,
    /// environment and PATH as the agent's commands.
    Shell {
        #[arg(long, env = "MOAT_SESSION", default_value = "main")]
        session: String,
    },
    /// Copy between the host and a session's container: `moat cp SESSION:PATH DIR` or
    /// `moat cp PATH SESSION:DIR` (the source lands inside the destination directory).
    Cp {
        /// A host path, or SESSION:PATH (absolute, any path in the container).
        src: String,
        /// A host directory, or SESSION:DIR in the container (made if missing).
        dst: String,
    },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A host directory as /workspace (the sandbox runs as its owner).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,
    /// With --workspace: mount it read-only.
    #[arg(long, requires = "workspace")]
    pub read_only: bool,
    /// With --workspace: let the sandbox write its git metadata (.git is read-only otherwise).
    #[arg(long, requires = "workspace", conflicts_with = "read_only")]
    pub git_writable: bool,
    /// The image instead of sandbox.image.
    #[arg(long)]
    pub image: Option<String>,
    /// `none` or `bridge` instead of sandbox.network.
    #[arg(long)]
    pub network: Option<String>,
    /// Environment override KEY=VALUE (repeatable; after --env-file).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A file of KEY=VALUE lines (blank lines and `#` comments skipped); repeatable.
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<std::path::PathBuf>,
    /// Timeout in seconds (0 = none); a command that runs out exits 124.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Keep the session and its container afterwards (its name is in the summary).
    #[arg(long)]
    pub keep: bool,
    /// The shell command.
    #[arg(required = true, last = true, num_args = 1..)]
    pub command: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum DaemonCommand {
    /// Whether a daemon runs for this home: its pid, build, config fingerprint (and whether
    /// they are this moat's) and the sessions, processes and approvals it owns.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Stop the daemon and wait until it has let go of the home. Refused, naming them, while
    /// it runs processes or waits on approvals, unless --force.
    Stop {
        /// Stop even while it runs processes or waits on approvals (a later daemon re-attaches
        /// sandbox processes and resumes the approvals).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// Approvals, newest first.
    List {
        /// Only this status: pending, approved, denied, expired, used.
        #[arg(long)]
        status: Option<String>,
        /// Every approval, not only pending ones.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// One approval in full, with its audit trail.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Allow a pending approval to run once (or, with --always, allowlist it for good).
    Approve {
        id: String,
        #[arg(long)]
        always: bool,
    },
    /// Refuse a pending approval.
    Deny { id: String },
    /// The audit log: requests, decisions, elevated runs, allowlist and skill changes, disk-bound stops.
    Audit {
        /// Only entries of this approval.
        #[arg(long)]
        id: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum AllowlistCommand {
    /// Run-time entries (configured ones live in moat.toml).
    List {
        /// sandbox or host (default: both).
        #[arg(long)]
        host: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Add an absolute executable path (glob), or with --command one exact command.
    Add {
        /// sandbox or host.
        #[arg(long, default_value = "host")]
        host: String,
        /// Treat ENTRY as an exact command line rather than a path; it is valid only for
        /// --session in --workdir.
        #[arg(long, requires_all = ["session", "workdir"])]
        command: bool,
        /// The session an exact command is allowed in.
        #[arg(long)]
        session: Option<String>,
        /// The working directory an exact command is allowed in (absolute; symlinks are
        /// resolved as a run resolves them).
        #[arg(long)]
        workdir: Option<String>,
        entry: String,
    },
    /// Remove an entry by id or by its text.
    Rm { entry: String },
}

#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// Configured skills and whether each is enabled.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Enable a configured skill (its binaries become allowlisted).
    Enable { name: String },
    /// Disable a skill.
    Disable { name: String },
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Session key every tool call runs in.
    #[arg(long, env = "MOAT_SESSION", default_value = "main")]
    pub session: String,
    /// Serve without the `process` tool: exec then runs every command to its end, ignoring
    /// yieldMs and background (as `exec.process_tool = false` does for every server).
    #[arg(long)]
    pub no_process_tool: bool,
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// Session key (one container per session).
    #[arg(long, env = "MOAT_SESSION", default_value = "main")]
    pub session: String,
    /// Working directory: in the sandbox a container path under /workspace, a relative path or
    /// a host workspace path; on the host an absolute path or one relative to the host workdir.
    #[arg(long)]
    pub workdir: Option<String>,
    /// Environment override KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Timeout in seconds (0 = none).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Return at once with a process id; follow up with `moat process`.
    #[arg(long)]
    pub background: bool,
    /// Move to the background after this many milliseconds.
    #[arg(long = "yield-ms")]
    pub yield_ms: Option<f64>,
    /// Run in a pseudo-terminal.
    #[arg(long)]
    pub pty: bool,
    /// Tighten the security level (deny, allowlist, full).
    #[arg(long)]
    pub security: Option<String>,
    /// Raise the ask level (off, on-miss, always).
    #[arg(long)]
    pub ask: Option<String>,
    /// Run on the host instead of the sandbox (needs `elevated.enabled` and this user in
    /// `elevated.allow_from.cli`).
    #[arg(long)]
    pub elevated: bool,
    /// Where to run: sandbox, host, or node (with --node).
    #[arg(long)]
    pub host: Option<String>,
    /// The paired node to run on (implies --host node; docs/nodes.md).
    #[arg(long)]
    pub node: Option<String>,
    /// On the node: sandbox (the default) or host.
    #[arg(long, requires = "node")]
    pub node_host: Option<String>,
    /// Print the exact tool result object as JSON.
    #[arg(long)]
    pub json: bool,
    /// A host directory as the session's /workspace, when the session is new (an existing
    /// session must already have this one).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,
    /// With --workspace: mount it read-only.
    #[arg(long, requires = "workspace")]
    pub read_only: bool,
    /// With --workspace: let the sandbox write its git metadata (.git is read-only otherwise).
    #[arg(long, requires = "workspace", conflicts_with = "read_only")]
    pub git_writable: bool,
    /// The shell command.
    #[arg(required = true, last = true, num_args = 1..)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ProcessArgs {
    /// list, poll, log, write, send-keys, submit, paste, kill, clear, remove.
    pub action: String,
    #[arg(long, env = "MOAT_SESSION", default_value = "main")]
    pub session: String,
    /// Process id (e.g. warm-river).
    #[arg(long)]
    pub id: Option<String>,
    /// Data for `write`, sent byte for byte: no escapes are interpreted, so `'a\n'` sends a
    /// backslash and an `n` (in a POSIX shell `$'a\n'` ends the line).
    #[arg(long)]
    pub data: Option<String>,
    /// Close stdin after `write`.
    #[arg(long)]
    pub eof: bool,
    /// Key names for `send-keys` (repeatable).
    #[arg(long = "key")]
    pub keys: Vec<String>,
    /// Hex bytes for `send-keys` (repeatable).
    #[arg(long)]
    pub hex: Vec<String>,
    /// Literal text for `send-keys`.
    #[arg(long)]
    pub literal: Option<String>,
    /// Text for `paste`.
    #[arg(long)]
    pub text: Option<String>,
    /// Send paste without bracketed-paste markers.
    #[arg(long)]
    pub no_bracketed: bool,
    /// First line for `log` (1-based, over the whole output).
    #[arg(long)]
    pub offset: Option<usize>,
    /// Line count for `log`.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Characters of line `--offset` to skip for `log`: reads on inside a line longer than a
    /// page, where the page's note says.
    #[arg(long)]
    pub char_offset: Option<usize>,
    /// Milliseconds `poll` may wait for the process to exit.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// The paired node the process runs on (an exec with --node started it).
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// List session containers.
    List {
        /// The daemon's warm pool instead: each shape, its ready containers, its size and
        /// its claims (hits and misses).
        #[arg(long)]
        pool: bool,
        #[arg(long)]
        json: bool,
    },
    /// Remove a session's container (its workspace stays, unless --purge).
    Rm {
        key: String,
        /// Also delete what moat made for the session: its workspace (never a host
        /// workspace, which is the operator's), run directory and own filesystems.
        #[arg(long)]
        purge: bool,
    },
    /// Create a session's container, with a host directory as its workspace if given.
    Create {
        key: String,
        /// A host directory as /workspace, fixed for the session's life; the sandbox runs as
        /// its owner unless sandbox.user is set.
        #[arg(long, value_name = "DIR")]
        workspace: Option<std::path::PathBuf>,
        /// Mount the workspace read-only.
        #[arg(long, requires = "workspace")]
        read_only: bool,
        /// Let the sandbox write the checkout's git metadata (.git, hooks, config); without
        /// it .git is mounted read-only, since git on the host runs what it finds there.
        #[arg(long, requires = "workspace", conflicts_with = "read_only")]
        git_writable: bool,
        /// The image instead of sandbox.image.
        #[arg(long)]
        image: Option<String>,
        /// `none` or `bridge` instead of sandbox.network.
        #[arg(long)]
        network: Option<String>,
    },
    /// Set an operator policy override for a session (tightens the config unless --loosen).
    Set {
        key: String,
        #[arg(long)]
        security: Option<String>,
        #[arg(long)]
        ask: Option<String>,
        /// Let the override be looser than the configured policy.
        #[arg(long)]
        loosen: bool,
        /// Carry cwd and exported variables between commands (true/false; overrides
        /// exec.sticky for this session).
        #[arg(long)]
        sticky: Option<bool>,
        /// The paired node this session's `host: "node"` calls go to when they name none
        /// (before exec.node; docs/nodes.md, "Calls"); an empty NAME clears it.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
    },
    /// Forget the directory and variables a sticky session carries.
    ResetState { key: String },
    /// Override a session's network egress (docs/security.md, "Network egress"): add allow
    /// or deny entries, set ask; applies to the next connection.
    Egress {
        key: String,
        /// An entry to allow for this session (repeatable): `host`, `*.domain`, `host:port`.
        #[arg(long)]
        allow: Vec<String>,
        /// An entry to refuse for this session (repeatable); wins over every allow.
        #[arg(long)]
        deny: Vec<String>,
        /// `off` or `on-miss` in place of sandbox.egress.ask.
        #[arg(long)]
        ask: Option<String>,
        /// Drop the override first (the config applies again).
        #[arg(long)]
        clear: bool,
    },
    /// Show a session's container and its effective policy levels.
    Show {
        key: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ImageCommand {
    /// Build the default sandbox image (and, offline, its local base first).
    Build {
        /// Tag to build (default: sandbox.image, or moat-e2b-base:bookworm with --e2b).
        #[arg(long)]
        tag: Option<String>,
        /// Build E2B's base template on top of the sandbox image (sandbox.image, built first
        /// when missing) instead (docs/e2b.md, "The base template").
        #[arg(long)]
        e2b: bool,
        /// Base image (default: moat-base:bookworm, bootstrapped locally when missing).
        #[arg(long)]
        base: Option<String>,
        /// Build only when the image is missing or an older moat's recipe built it; an image
        /// `moat image build` did not make (your own) is left as it is.
        #[arg(long)]
        if_outdated: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Print the verdict, each segment's resolution and rule, and the plan that would run.
    Explain(ExplainArgs),
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// sandbox or host.
    #[arg(long, default_value = "sandbox")]
    pub host: String,
    #[arg(long)]
    pub security: Option<String>,
    #[arg(long)]
    pub ask: Option<String>,
    /// Allowlist entry (path glob or bare name); repeatable. Replaces the configured list.
    #[arg(long = "allow")]
    pub allow: Vec<String>,
    /// Safe bin name; repeatable. Replaces the configured list.
    #[arg(long = "safe-bin")]
    pub safe_bins: Vec<String>,
    /// Working directory the command would run in.
    #[arg(long, default_value = "/workspace")]
    pub cwd: String,
    /// Judge it as an exec in this session would: through the daemon, with names resolved in
    /// the session's sandbox (its container is created if it does not run). Without it, a
    /// sandbox command is judged in a throwaway sandbox of the configured image, removed
    /// afterwards, and a host command in this host's trusted directories.
    #[arg(long)]
    pub session: Option<String>,
    /// A variable the request would set, `KEY=VALUE`; repeatable. Judged as `exec` judges a
    /// request's `env`.
    #[arg(long = "env")]
    pub env: Vec<String>,
    #[arg(long)]
    pub json: bool,
    #[arg(required = true, last = true, num_args = 1..)]
    pub command: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print the effective configuration (file + MOAT_* overrides + defaults).
    Show {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Warm exec samples per method.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// New-session samples per method (warm pool, no pool, docker run --rm).
    #[arg(long, default_value_t = 10)]
    pub cold_runs: usize,
    /// New sessions 8 clients claim at once from a full warm pool (at most 32).
    #[arg(long, default_value_t = 16)]
    pub claims: usize,
    /// `moat exec -- true` CLI samples, each beside a `docker exec` CLI one.
    #[arg(long, default_value_t = 100)]
    pub cli_runs: usize,
    /// Bytes of output for the flood test.
    #[arg(long, default_value_t = 1 << 30)]
    pub flood_bytes: u64,
    /// Measure the process layer instead: concurrent execs, poll latency, idle-session RSS,
    /// RSS after 100 execs printing 1 MB each.
    #[arg(long)]
    pub processes: bool,
    /// Concurrent execs for --processes.
    #[arg(long, default_value_t = 50)]
    pub concurrent: usize,
    /// Idle sessions for --processes.
    #[arg(long, default_value_t = 100)]
    pub idle_sessions: usize,
    /// Compare OCI runtimes side by side instead (e.g. `runc,runsc`; `default` is the
    /// engine's default): warm exec and cold start under each, in one run.
    #[arg(long, value_delimiter = ',')]
    pub runtimes: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Also listen on TCP (overrides serve.tcp); requests there need a bearer token.
    #[arg(long)]
    pub tcp: Option<std::net::SocketAddr>,
    /// Stop after this many seconds with no connection, running process or pending approval.
    /// Clients that start the daemon on demand pass serve.idle_exit_secs.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_exit: Option<u64>,
    /// Also serve paired gateways on this TCP address with TLS (overrides node.listen;
    /// docs/nodes.md).
    #[arg(long, value_name = "ADDR")]
    pub node_listen: Option<std::net::SocketAddr>,
}

#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// `moat serve` as a node: the daemon, with the TLS listener for paired gateways on
    /// --listen (or node.listen).
    Serve {
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
    },
    /// The node's certificate fingerprint (made now if there is none) and its listener.
    Info {
        #[arg(long)]
        json: bool,
    },
    /// Pairing tokens issued to gateways.
    #[command(subcommand)]
    Tokens(NodeTokensCommand),
}

#[derive(Subcommand, Debug)]
pub enum NodeTokensCommand {
    /// Issue a token for gateway NAME (replacing its old one); printed once, kept hashed.
    Add { gateway: String },
    /// The gateways tokens were issued to.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke gateway NAME's token: its next call is refused.
    Revoke { gateway: String },
}

#[derive(Subcommand, Debug)]
pub enum NodesCommand {
    /// Pair with the node at URL (https://HOST:PORT), pinning its certificate.
    Add {
        name: String,
        url: String,
        /// The node's `SHA256:…`, as `moat node info` prints it there.
        #[arg(long)]
        fingerprint: String,
        /// The token the node's operator issued to this gateway.
        #[arg(long, env = "MOAT_NODE_TOKEN", hide_env_values = true)]
        token: String,
    },
    /// Each paired node: reachable or not, its moat build and what it offers.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget a node.
    Rm { name: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand's flags are added only when it is parsed: clap's own checks of the
    /// whole grammar (no flag twice, every `requires` and `conflicts_with` naming a flag) still
    /// run over all of them, each built.
    #[test]
    fn the_whole_grammar_holds() {
        Cli::command().debug_assert();
    }

    /// `moat exec` gets its flags, their rules and its command from a grammar whose other
    /// subcommands were never built.
    #[test]
    fn exec_parses_its_deferred_flags() {
        let parse = |args: &[&str]| Cli::try_parse_from(["moat", "exec"].iter().chain(args));
        let Command::Exec(a) = parse(&[
            "--session",
            "s",
            "--env",
            "A=1",
            "--timeout",
            "5",
            "--json",
            "--",
            "echo",
            "a b",
        ])
        .unwrap()
        .command
        else {
            panic!("not exec");
        };
        assert_eq!(
            (a.session.as_str(), a.env, a.timeout, a.json, a.command),
            (
                "s",
                vec!["A=1".to_string()],
                Some(5.0),
                true,
                vec!["echo".to_string(), "a b".into()]
            )
        );
        let kind = |args: &[&str]| parse(args).map(|_| ()).unwrap_err().kind();
        assert_eq!(
            kind(&["--nope", "--", "true"]),
            clap::error::ErrorKind::UnknownArgument
        );
        assert_eq!(
            kind(&["--read-only", "--", "true"]),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        assert_eq!(kind(&[]), clap::error::ErrorKind::MissingRequiredArgument);
        assert_eq!(kind(&["--help"]), clap::error::ErrorKind::DisplayHelp);
    }
}
