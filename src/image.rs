//! Builds the sandbox image from `images/sandbox` (embedded in the binary, so an installed
//! moat needs no checkout). Without a registry the base is bootstrapped from the host's own
//! Debian mirror configuration by `scripts/bootstrap-base-image.sh` (also embedded).

use crate::runtime::{Runtime, RuntimeError};

const DOCKERFILE: &str = include_str!("../images/sandbox/Dockerfile");
const BOOTSTRAP: &str = include_str!("../scripts/bootstrap-base-image.sh");
/// The locally bootstrapped base the Dockerfile defaults to.
pub const LOCAL_BASE: &str = "moat-base:bookworm";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("bootstrap the base image {0} (see the output above; it needs root, debootstrap and the host's Debian mirror)")]
    Bootstrap(String),
    #[error("pack the build context")]
    Context(#[source] std::io::Error),
}

/// Builds `tag` on top of `base` (default: the local base, bootstrapped first if missing).
pub async fn build(
    runtime: &dyn Runtime,
    tag: &str,
    base: Option<&str>,
    progress: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(), ImageError> {
    let base = base.unwrap_or(LOCAL_BASE).to_string();
    if !runtime.image_exists(&base).await? {
        if base != LOCAL_BASE {
            return Err(ImageError::Bootstrap(base));
        }
        progress(&format!(
            "base image {base} is missing: bootstrapping it from the host's Debian mirror"
        ));
        let status = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(BOOTSTRAP)
            .arg("bootstrap-base-image")
            .arg(&base)
            .status()
            .await
            .map_err(|_| ImageError::Bootstrap(base.clone()))?;
        if !status.success() {
            return Err(ImageError::Bootstrap(base));
        }
    }
    let context = context_tar().map_err(ImageError::Context)?;
    runtime
        .build_image(
            context,
            tag,
            vec![("BASE".into(), base)],
            Box::new(progress),
        )
        .await?;
    Ok(())
}

fn context_tar() -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(DOCKERFILE.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append_data(&mut header, "Dockerfile", DOCKERFILE.as_bytes())?;
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    #[test]
    fn context_holds_the_dockerfile() {
        let tar = super::context_tar().unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["Dockerfile"]);
    }
}
