//! `moat bench`: runs the exec benchmark (`crate::bench`) and prints its table.

use super::term::{say_err, say_part};
use std::process::ExitCode;

use moat::home::Home;

use super::args::BenchArgs;

pub async fn run(home: Home, a: BenchArgs) -> anyhow::Result<ExitCode> {
    if !a.runtimes.is_empty() {
        let report =
            moat::bench::runtimes::run(home, &a.runtimes, a.runs, a.cold_runs, |l| say_err!("{l}"))
                .await?;
        if a.json {
            super::term::json_pretty(&report)?;
        } else {
            say_part!("{}", report.render());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.processes {
        let report =
            moat::bench::run_processes(home, a.concurrent, a.idle_sessions, |l| say_err!("{l}"))
                .await?;
        if a.json {
            super::term::json_pretty(&report)?;
        } else {
            say_part!("{}", report.render());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let counts = moat::bench::Runs {
        warm: a.runs,
        cold: a.cold_runs,
        claims: a.claims,
        cli: a.cli_runs,
        flood_bytes: a.flood_bytes,
    };
    let report = moat::bench::run(home, counts, |l| say_err!("{l}")).await?;
    if a.json {
        super::term::json_pretty(&report)?;
    } else {
        say_part!("{}", report.render());
    }
    Ok(ExitCode::SUCCESS)
}
