use super::term::{say, say_err};
use std::process::ExitCode;

use moat::home::Home;

use super::args::ImageCommand;

pub async fn run(home: Home, cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let ImageCommand::Build { tag, base } = cmd;
    let (config, _) = moat::config::load(&home.config_file())?;
    let tag = tag.unwrap_or(config.sandbox.image);
    let runtime = moat::runtime::docker::DockerRuntime::connect().await?;
    moat::image::build(&runtime, &tag, base.as_deref(), |line| say_err!("{line}")).await?;
    say!("built {tag}");
    Ok(ExitCode::SUCCESS)
}
