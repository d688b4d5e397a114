//! Network calls: the per-session internal network and the proxy's second leg
//! (docs/security.md, "Network egress").

use std::collections::{BTreeMap, HashMap};

use bollard::models::{EndpointSettings, NetworkConnectRequest, NetworkCreateRequest};
use bollard::query_parameters::ListNetworksOptions;

use super::DockerRuntime;
use crate::runtime::RuntimeError;

impl DockerRuntime {
    pub(super) async fn ensure_network(
        &self,
        name: &str,
        internal: bool,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, RuntimeError> {
        if let Some(subnets) = self.subnets(name).await? {
            return Ok(subnets);
        }
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            internal: Some(internal),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => {}
            // Created by a racing call in the meantime.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => {}
            Err(e) => return Err(RuntimeError::engine(format!("create network {name}"), e)),
        }
        Ok(self.subnets(name).await?.unwrap_or_default())
    }

    /// A network's subnets; `None` when it does not exist.
    async fn subnets(&self, name: &str) -> Result<Option<Vec<String>>, RuntimeError> {
        match self.docker.inspect_network(name, None).await {
            Ok(n) => Ok(Some(
                n.ipam
                    .and_then(|i| i.config)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|c| c.subnet)
                    .collect(),
            )),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(RuntimeError::engine(format!("inspect network {name}"), e)),
        }
    }

    pub(super) async fn drop_network(&self, name: &str) -> Result<(), RuntimeError> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(RuntimeError::engine(format!("remove network {name}"), e)),
        }
    }

    pub(super) async fn networks(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![label.to_string()],
            )])),
        };
        let list = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(|e| RuntimeError::engine("list networks", e))?;
        Ok(list.into_iter().filter_map(|n| n.name).collect())
    }

    pub(super) async fn attach(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        let request = NetworkConnectRequest {
            container: container.to_string(),
            endpoint_config: Some(EndpointSettings::default()),
        };
        self.docker
            .connect_network(network, request)
            .await
            .map_err(|e| {
                RuntimeError::engine(format!("connect {container} to network {network}"), e)
            })
    }
}
