use super::term::say;
use std::process::ExitCode;

use moat::home::Home;
use moat::runtime::Runtime;

pub async fn run(home: Home) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let config = match moat::config::load(&home.config_file()) {
        Ok((c, _)) => {
            say!("ok    config {} ", home.config_file().display());
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
    match moat::runtime::docker::DockerRuntime::connect().await {
        Ok(rt) => match rt.ping().await {
            Ok(info) => {
                say!(
                    "ok    docker engine {} (API {})",
                    info.version,
                    info.api_version
                );
                if let Some(c) = &config {
                    match rt.image_exists(&c.sandbox.image).await {
                        Ok(true) => say!("ok    image {}", c.sandbox.image),
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
