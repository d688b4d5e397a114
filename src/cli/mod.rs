//! Command-line interface. One file per subcommand; `anyhow` only lives here.

mod allowlist;
mod approvals;
mod args;
mod bench;
mod cp;
mod daemon;
mod doctor;
mod egress_proxy;
mod exec;
mod exit;
mod failure;
mod image;
mod interrupt;
mod mcp;
mod node;
mod nodes;
mod policy;
mod pool;
mod process;
mod run;
mod run_as;
mod serve;
mod sessions;
mod sessions_egress;
mod shell;
mod skills;
mod term;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use term::{say, say_err, say_part};

pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(moat::host::RUN_AS_SUBCOMMAND) {
        return run_as::main(&args[2..]);
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(|| term::LogWriter)
        .with_ansi(false)
        // A closed stderr must not turn a log line into a panic (tracing's fallback report
        // is a direct write to stderr, which panics): a refused host command triggers warnings at will.
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MOAT_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // `moat exec` is one call to the daemon: a runtime on this thread alone starts and ends
    // without worker threads to spawn and join (docs/ARCHITECTURE.md, "Daemon").
    let exec = matches!(cli.command, Command::Exec(_));
    let mut builder = if exec {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            say_err!("moat: failed to start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(run(cli));
    if exec {
        // The process ends next: tearing the runtime down (its tasks, drivers and
        // descriptors) would be work the exit does anyway, on every agent command. Output
        // goes through std's handles, which the exit still flushes.
        std::mem::forget(runtime);
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}");
            let classified = e.downcast_ref::<failure::Classified>();
            // Contract texts (docs/approvals.md) are complete sentences, not "failed to …" fragments.
            if classified.is_some_and(failure::Classified::is_sentence) {
                say_err!("moat: {msg}");
            } else {
                say_err!("moat: failed to {msg}");
            }
            if classified.is_some_and(|c| c.kind.edges().refusal) {
                ExitCode::from(exec::REFUSED)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let home = moat::home::Home::from_env();
    match cli.command {
        Command::Exec(a) => exec::run(home, a).await,
        Command::Process(a) => process::run(home, a).await,
        Command::Sessions(a) => sessions::run(home, a).await,
        Command::Image(a) => image::run(home, a).await,
        Command::Policy(a) => policy::run(home, a).await,
        Command::Doctor { session } => doctor::run(home, session).await,
        Command::Config(args::ConfigCommand::Show { json }) => {
            let (config, source) = moat::config::load(&home.config_file())?;
            if json {
                term::json_pretty(&config)?;
            } else {
                match &source.file {
                    Some(f) => say!("# from {}", f.display()),
                    None => say!("# no {} (defaults)", home.config_file().display()),
                }
                if !source.overrides.is_empty() {
                    say!("# environment overrides: {}", source.overrides.join(", "));
                }
                say_part!("{}", toml::to_string_pretty(&config)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(a) => bench::run(home, a).await,
        Command::Serve(a) => serve::run(home, a).await,
        Command::Events { session } => daemon::follow_events(&home, &session).await,
        Command::Daemon(a) => daemon::run(&home, a).await,
        Command::Approvals(a) => approvals::run(home, a),
        Command::Allowlist(a) => allowlist::run(home, a),
        Command::Skills(a) => skills::run(home, a),
        Command::Mcp(a) => mcp::run(home, a).await,
        Command::Run(a) => run::run(home, a).await,
        Command::Node(args::NodeCommand::Serve { listen }) => node::serve(home, listen).await,
        Command::Node(a) => node::run(home, a),
        Command::Nodes(a) => nodes::run(home, a).await,
        Command::EgressProxy {
            listen,
            control,
            peers,
        } => egress_proxy::run(&listen, control, &peers).await,
        Command::Cp { src, dst } => cp::run(home, &src, &dst).await,
        Command::Shell { session } => shell::run(home, &session).await,
    }
}
