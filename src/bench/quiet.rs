//! The baselines' commands (`docker exec`, `docker run`) and the CLI under test, run as a
//! user runs them, a process each, their output dropped.

use std::path::Path;
use std::process::Stdio;

use super::BenchError;

/// Runs `program args` with no output, `MOAT_HOME` set to `home` when given; an error names
/// the command.
pub(super) async fn quiet(
    program: &Path,
    args: &[&str],
    home: Option<&Path>,
) -> Result<(), BenchError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(home) = home {
        cmd.env("MOAT_HOME", home);
    }
    let what = || format!("{} {}", program.display(), args.join(" "));
    let status = cmd.status().await.map_err(|_| BenchError::Docker(what()))?;
    if !status.success() {
        return Err(BenchError::Docker(what()));
    }
    Ok(())
}

/// `docker ARGS`, quietly.
pub(super) async fn docker(args: &[&str]) -> Result<(), BenchError> {
    quiet(Path::new("docker"), args, None).await
}
