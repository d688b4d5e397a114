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

/// What an image's shells are, for `moat doctor`: commands run with `sh -lc` unless
/// `sandbox.shell = "bash"` (README, "Configuration").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shells {
    /// Where `/bin/sh` finally leads (`/usr/bin/dash` on Debian).
    pub sh: String,
    /// Where `bash` is on the login PATH, if anywhere.
    pub bash: Option<String>,
}

/// Prints `/bin/sh`'s target, then `bash`'s path (or nothing). `readlink -f` is in the images
/// moat builds; `ls -l` is the fallback for a one-hop link.
const SHELLS_PROBE: &str = r#"t=$(readlink -f /bin/sh 2>/dev/null) || t=
if [ -z "$t" ]; then t=$(ls -l /bin/sh 2>/dev/null); t=${t##* -> }; fi
printf '%s\n' "$t"
command -v bash 2>/dev/null || true"#;

/// Finds out which shells `image` has, in a throwaway container with no network, no mounts,
/// a read-only root and all capabilities dropped (removed afterwards, also on failure).
pub async fn probe_shells(
    rt: &dyn Runtime,
    image: &str,
    user: &str,
) -> Result<Shells, RuntimeError> {
    let name = format!(
        "moat-doctor-{}-{}",
        std::process::id(),
        crate::names::generate(|_| false)
    );
    let spec = crate::runtime::ContainerSpec {
        name: name.clone(),
        image: image.to_string(),
        labels: Default::default(),
        user: user.to_string(),
        env: vec!["LANG=C.UTF-8".into()],
        mounts: Vec::new(),
        tmpfs: Default::default(),
        read_only_root: true,
        network: "none".into(),
        cap_add: Vec::new(),
        security_opt: vec!["no-new-privileges:true".into()],
        pids_limit: 32,
        memory_bytes: 64 * 1024 * 1024,
        shm_bytes: 0,
        nano_cpus: 0,
        runtime: None,
        working_dir: "/".into(),
        // Ends by itself should moat die before removing it.
        cmd: vec!["sleep".into(), "60".into()],
        dns: Vec::new(),
    };
    let id = rt.create_container(&spec).await?;
    let result = async {
        rt.start_container(&id).await?;
        let argv = vec!["sh".into(), "-lc".into(), SHELLS_PROBE.into()];
        rt.exec_capture(&id, argv, None).await
    }
    .await;
    let _ = rt.remove_container(&id).await;
    let (_, out) = result?;
    let out = String::from_utf8_lossy(&out);
    let mut lines = out.lines().map(str::trim);
    Ok(Shells {
        sh: lines.next().unwrap_or_default().to_string(),
        bash: lines
            .next()
            .filter(|l| l.starts_with('/'))
            .map(str::to_string),
    })
}
