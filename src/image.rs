//! Builds the sandbox image from `images/sandbox`, and E2B's "base" template on top of it from
//! `images/e2b-base` (both embedded in the binary, so an installed moat needs no checkout). Without a registry the base is bootstrapped from the host's own
//! Debian mirror configuration by `scripts/bootstrap-base-image.sh` (also embedded), and the
//! toolchain comes from the same mirror through the base's apt sources.
//!
//! Each image carries the recipe it was built from (a digest of the Dockerfile), so a moat
//! whose recipe changed (a toolchain added) can tell an image built by an older one
//! ([`freshness`], `moat image build --if-outdated`, `moat doctor`).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::runtime::{Runtime, RuntimeError};

const DOCKERFILE: &str = include_str!("../images/sandbox/Dockerfile");
const E2B_DOCKERFILE: &str = include_str!("../images/e2b-base/Dockerfile");
/// The tag `moat image build --e2b` builds, and E2B's `base` template runs unless
/// `[e2b.templates]` maps it (docs/e2b.md, "The base template").
pub const E2B_BASE_TAG: &str = crate::config::e2b::BASE_IMAGE;
const BOOTSTRAP: &str = include_str!("../scripts/bootstrap-base-image.sh");
/// The locally bootstrapped base the Dockerfile defaults to.
pub const LOCAL_BASE: &str = "moat-base:bookworm";
/// The image label that holds [`recipe`].
pub const RECIPE_LABEL: &str = "dev.moat.image.recipe";
/// The engine's predefined proxy build arguments: passed on from moat's environment, so the
/// build's apt reaches the mirror as debootstrap did; the engine keeps them out of the
/// image's history.
const PROXY_ARGS: [&str; 8] = [
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
];

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("bootstrap the base image {0} (see the output above; it needs root, debootstrap and the host's Debian mirror)")]
    Bootstrap(String),
    #[error("build E2B's base template: its base, the sandbox image {0}, is missing; run `moat image build` first")]
    NoSandboxImage(String),
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
    build_from(runtime, DOCKERFILE, recipe(), tag, base, Box::new(progress)).await
}

/// Builds E2B's base template as `tag` on top of the sandbox image `sandbox` (which must
/// exist: `moat image build` makes it).
pub async fn build_e2b_base(
    runtime: &dyn Runtime,
    tag: &str,
    sandbox: &str,
    progress: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(), ImageError> {
    if !runtime.image_exists(sandbox).await? {
        return Err(ImageError::NoSandboxImage(sandbox.to_string()));
    }
    let base = sandbox.to_string();
    build_from(
        runtime,
        E2B_DOCKERFILE,
        e2b_recipe(),
        tag,
        base,
        Box::new(progress),
    )
    .await
}

async fn build_from(
    runtime: &dyn Runtime,
    dockerfile: &str,
    recipe: String,
    tag: &str,
    base: String,
    progress: crate::runtime::Progress,
) -> Result<(), ImageError> {
    let context = context_tar(dockerfile).map_err(ImageError::Context)?;
    let mut args = vec![("BASE".into(), base)];
    for name in PROXY_ARGS {
        if let Ok(v) = std::env::var(name) {
            args.push((name.to_string(), v));
        }
    }
    let labels = vec![(RECIPE_LABEL.to_string(), recipe)];
    runtime
        .build_image(context, tag, args, labels, progress)
        .await?;
    Ok(())
}

/// The recipe this moat builds the sandbox image from: the first 12 hex digits of the
/// Dockerfile's SHA-256.
pub fn recipe() -> String {
    digest(DOCKERFILE)
}

/// The recipe of E2B's base template, the same way.
pub fn e2b_recipe() -> String {
    digest(E2B_DOCKERFILE)
}

fn digest(dockerfile: &str) -> String {
    hex::encode(&Sha256::digest(dockerfile.as_bytes())[..6])
}

/// What an image under a tag is, against this moat's [`recipe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// The engine has no such image.
    Missing,
    /// Built from this moat's recipe.
    Current,
    /// Built by `moat image build` from another recipe (the one named, or one from before
    /// recipes were labelled: the default tag without a label).
    Outdated(Option<String>),
    /// Not built by `moat image build`: a user's own image, left as it is.
    NotMoats,
}

/// Decides [`Freshness`] from an image's labels (`None`: no such image). `default_tag` is
/// the configuration's default `sandbox.image`, the only tag moat's own builds took before
/// images carried their recipe.
pub fn freshness(
    tag: &str,
    labels: Option<&HashMap<String, String>>,
    default_tag: &str,
) -> Freshness {
    freshness_of(&recipe(), tag, labels, default_tag)
}

/// [`freshness`] against any recipe (`e2b_recipe` for E2B's base template).
pub fn freshness_of(
    want: &str,
    tag: &str,
    labels: Option<&HashMap<String, String>>,
    default_tag: &str,
) -> Freshness {
    let Some(labels) = labels else {
        return Freshness::Missing;
    };
    match labels.get(RECIPE_LABEL) {
        Some(r) if *r == want => Freshness::Current,
        Some(r) => Freshness::Outdated(Some(r.clone())),
        None if tag == default_tag => Freshness::Outdated(None),
        None => Freshness::NotMoats,
    }
}

fn context_tar(dockerfile: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append_data(&mut header, "Dockerfile", dockerfile.as_bytes())?;
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{freshness, recipe, Freshness, RECIPE_LABEL};

    #[test]
    fn freshness_table() {
        let label = |v: &str| HashMap::from([(RECIPE_LABEL.to_string(), v.to_string())]);
        let none = HashMap::new();
        let current = label(&recipe());
        let old = label("0123456789ab");
        let default = "moat-sandbox:bookworm";
        type Labels = HashMap<String, String>;
        let cases: [(&str, Option<&Labels>, Freshness); 7] = [
            (default, None, Freshness::Missing),
            ("mine:1", None, Freshness::Missing),
            (default, Some(&current), Freshness::Current),
            ("mine:1", Some(&current), Freshness::Current),
            (
                default,
                Some(&old),
                Freshness::Outdated(Some("0123456789ab".into())),
            ),
            // The default tag without a label: built by a moat before recipes were labelled.
            (default, Some(&none), Freshness::Outdated(None)),
            // Any other tag without a label is a user's own image: never rebuilt.
            ("mine:1", Some(&none), Freshness::NotMoats),
        ];
        for (tag, labels, want) in cases {
            assert_eq!(freshness(tag, labels, default), want, "{tag} {labels:?}");
        }
    }

    #[test]
    fn the_recipe_is_a_digest_of_the_dockerfile() {
        assert_eq!(recipe().len(), 12);
        assert!(recipe().chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn context_holds_the_dockerfile() {
        let tar = super::context_tar(super::DOCKERFILE).unwrap();
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
