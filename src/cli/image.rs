//! `moat image build`: builds the sandbox image (its tag and base from the flags or the
//! configuration; `--if-outdated` only when it is), or with `--e2b` E2B's base template on
//! top of it.

use super::term::{say, say_err};
use std::process::ExitCode;

use moat::home::Home;
use moat::image::Freshness;
use moat::runtime::Engine;

use super::args::ImageCommand;

pub async fn run(home: Home, cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let ImageCommand::Build {
        tag,
        e2b,
        base,
        if_outdated,
    } = cmd;
    let (config, _) = moat::config::load(&home.config_file())?;
    let runtime = moat::runtime::docker::DockerRuntime::connect().await?;
    if e2b {
        let tag = tag.unwrap_or_else(|| moat::image::E2B_BASE_TAG.to_string());
        let sandbox = base.unwrap_or(config.sandbox.image);
        if !runtime.image_exists(&sandbox).await? {
            build_sandbox(&runtime, &sandbox, None, false).await?;
        }
        let want = moat::image::e2b_recipe();
        if if_outdated && !outdated(&runtime, &tag, &want, moat::image::E2B_BASE_TAG).await? {
            return Ok(ExitCode::SUCCESS);
        }
        moat::image::build_e2b_base(&runtime, &tag, &sandbox, |line| say_err!("{line}")).await?;
        say!("built {tag}");
        return Ok(ExitCode::SUCCESS);
    }
    let tag = tag.unwrap_or(config.sandbox.image);
    build_sandbox(&runtime, &tag, base.as_deref(), if_outdated).await?;
    Ok(ExitCode::SUCCESS)
}

/// Builds the sandbox image as `tag` (with `if_outdated`, only when it is).
async fn build_sandbox(
    runtime: &moat::runtime::docker::DockerRuntime,
    tag: &str,
    base: Option<&str>,
    if_outdated: bool,
) -> anyhow::Result<()> {
    let default = moat::config::Config::default().sandbox.image;
    if if_outdated && !outdated(runtime, tag, &moat::image::recipe(), &default).await? {
        return Ok(());
    }
    moat::image::build(runtime, tag, base, |line| say_err!("{line}")).await?;
    say!("built {tag}");
    Ok(())
}

/// Whether `tag` must be built for recipe `want`, saying why not when it need not.
async fn outdated(
    runtime: &moat::runtime::docker::DockerRuntime,
    tag: &str,
    want: &str,
    default: &str,
) -> anyhow::Result<bool> {
    let labels = runtime.image_labels(tag).await?;
    {
        match moat::image::freshness_of(want, tag, labels.as_ref(), default) {
            Freshness::Current => {
                say!("{tag} is up to date (recipe {want})");
                return Ok(false);
            }
            Freshness::NotMoats => {
                say!("{tag} was not built by `moat image build`: left as it is");
                return Ok(false);
            }
            Freshness::Outdated(old) => say_err!(
                "{tag} was built from an older recipe ({}): building recipe {want}",
                old.as_deref().unwrap_or("unlabelled"),
            ),
            Freshness::Missing => {}
        }
    }
    Ok(true)
}
