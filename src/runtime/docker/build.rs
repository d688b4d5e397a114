//! Images made by the engine: builds with the classic builder and an in-memory tar context,
//! and commits of a container's filesystem (E2B's snapshots, docs/e2b.md, "Snapshots and
//! forks").

use std::collections::{BTreeMap, HashMap};

use bollard::query_parameters::{BuildImageOptions, CommitContainerOptions};
use futures::StreamExt;

use super::DockerRuntime;
use crate::runtime::{Progress, RuntimeError};

impl DockerRuntime {
    pub(super) async fn build(
        &self,
        context: Vec<u8>,
        tag: &str,
        build_args: Vec<(String, String)>,
        labels: Vec<(String, String)>,
        progress: Progress,
    ) -> Result<(), RuntimeError> {
        let options = BuildImageOptions {
            dockerfile: "Dockerfile".into(),
            t: Some(tag.to_string()),
            rm: true,
            forcerm: true,
            buildargs: Some(build_args.into_iter().collect::<HashMap<_, _>>()),
            // On the final image, without a step: every step costs a container and a commit.
            labels: Some(labels.into_iter().collect::<HashMap<_, _>>()),
            // moat builds only its own Dockerfiles. The sandbox image's RUN step installs from
            // the Debian mirror the host's apt names, which may answer only on the host's
            // loopback (a local cache): the build reaches the network as the host does
            // (README, "The sandbox image").
            networkmode: Some("host".into()),
            ..Default::default()
        };
        // `build_image(…, None)` panics inside bollard; the context is always passed.
        let mut stream =
            self.docker
                .build_image(options, None, Some(bollard::body_full(context.into())));
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| RuntimeError::engine(format!("build image {tag}"), e))?;
            if let Some(line) = info.stream.as_deref() {
                for l in line.lines().filter(|l| !l.trim().is_empty()) {
                    progress(l);
                }
            }
            if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                return Err(RuntimeError::Other {
                    action: format!("build image {tag}"),
                    message: detail,
                });
            }
        }
        Ok(())
    }
}

impl DockerRuntime {
    /// The labels of `image`, or `None` when the engine has no such image: how `moat image
    /// build --if-outdated` and `moat doctor` tell an image moat built from an older recipe.
    pub async fn image_labels(
        &self,
        image: &str,
    ) -> Result<Option<HashMap<String, String>>, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(i) => Ok(Some(i.config.and_then(|c| c.labels).unwrap_or_default())),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(RuntimeError::engine(format!("inspect image {image}"), e)),
        }
    }

    pub(super) async fn tags(&self, repository: &str) -> Result<Vec<String>, RuntimeError> {
        let options = bollard::query_parameters::ListImagesOptions {
            filters: Some(HashMap::from([(
                "reference".to_string(),
                vec![repository.to_string()],
            )])),
            ..Default::default()
        };
        let list = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(|e| RuntimeError::engine(format!("list images of {repository}"), e))?;
        Ok(list
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .filter(|t| t.split(':').next() == Some(repository))
            .collect())
    }

    /// The tags of the images carrying `label` (`key=value`).
    pub(super) async fn labelled(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        let options = bollard::query_parameters::ListImagesOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![label.to_string()],
            )])),
            ..Default::default()
        };
        let list = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(|e| RuntimeError::engine(format!("list images labelled {label}"), e))?;
        Ok(list.into_iter().flat_map(|i| i.repo_tags).collect())
    }

    pub(super) async fn untag(&self, tag: &str) -> Result<(), RuntimeError> {
        self.docker
            .remove_image(
                tag,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
            .map(|_| ())
            .map_err(|e| RuntimeError::engine(format!("remove image {tag}"), e))
    }

    /// The container's own layer as the image `tag`. The engine fills in what the config
    /// leaves empty from the container's (its command, environment, labels), which a session
    /// made from the image overrides with its own.
    pub(super) async fn commit(
        &self,
        name: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        let (repo, version) = tag.rsplit_once(':').unwrap_or((tag, "latest"));
        let options = CommitContainerOptions {
            container: Some(name.to_string()),
            repo: Some(repo.to_string()),
            tag: Some(version.to_string()),
            // A commit of a running container could catch a file half-written.
            pause: true,
            ..Default::default()
        };
        let config = bollard::models::ContainerConfig {
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        self.docker
            .commit_container(options, config)
            .await
            .map(|_| ())
            .map_err(|e| RuntimeError::engine(format!("commit {name} to {tag}"), e))
    }
}
