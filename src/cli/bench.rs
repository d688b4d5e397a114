use std::process::ExitCode;

use moat::home::Home;

use super::args::BenchArgs;

pub async fn run(home: Home, a: BenchArgs) -> anyhow::Result<ExitCode> {
    if a.processes {
        let report =
            moat::bench::run_processes(home, a.concurrent, a.idle_sessions, |l| eprintln!("{l}"))
                .await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.render());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = moat::bench::run(home, a.runs, a.cold_runs, a.flood_bytes, |l| {
        eprintln!("{l}")
    })
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(ExitCode::SUCCESS)
}
