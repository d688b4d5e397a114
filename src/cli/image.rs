//! `moat image build`: builds the sandbox image (its tag and base from the flags or the
//! configuration; `--if-outdated` only when it is).

use super::term::{say, say_err};
use std::process::ExitCode;

use moat::home::Home;
use moat::image::Freshness;

use super::args::ImageCommand;

pub async fn run(home: Home, cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let ImageCommand::Build {
        tag,
        base,
        if_outdated,
    } = cmd;
    let (config, _) = moat::config::load(&home.config_file())?;
    let tag = tag.unwrap_or(config.sandbox.image);
    let runtime = moat::runtime::docker::DockerRuntime::connect().await?;
    if if_outdated {
        let labels = runtime.image_labels(&tag).await?;
        let default = moat::config::Config::default().sandbox.image;
        match moat::image::freshness(&tag, labels.as_ref(), &default) {
            Freshness::Current => {
                say!("{tag} is up to date (recipe {})", moat::image::recipe());
                return Ok(ExitCode::SUCCESS);
            }
            Freshness::NotMoats => {
                say!("{tag} was not built by `moat image build`: left as it is");
                return Ok(ExitCode::SUCCESS);
            }
            Freshness::Outdated(old) => say_err!(
                "{tag} was built from an older recipe ({}): building recipe {}",
                old.as_deref().unwrap_or("unlabelled"),
                moat::image::recipe()
            ),
            Freshness::Missing => {}
        }
    }
    moat::image::build(&runtime, &tag, base.as_deref(), |line| say_err!("{line}")).await?;
    say!("built {tag}");
    Ok(ExitCode::SUCCESS)
}
