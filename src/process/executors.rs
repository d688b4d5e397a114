//! [`Executors`]: what the registry starts and watches processes with, built by the app.

use std::sync::Arc;

use crate::contract::Place;
use crate::host::HostExecutor;
use crate::runtime::{Engine, Executor, Launch, Wrapping};

/// The executors behind the registry, one per [`Place`], and the engine for what the
/// registry must know about a container. The app builds them (src/app.rs) so the registry
/// never decides how commands reach a container (docs/ARCHITECTURE.md, "Seams").
#[derive(Clone)]
pub struct Executors {
    /// Session containers' commands: the helper transport, or the engine's own exec
    /// (docs/helper.md).
    pub sandbox: Arc<dyn Executor>,
    /// Elevated commands on this machine; concrete, because `moat serve` asks it which live
    /// host command leads a process group (docs/security.md, "The operator channel").
    pub host: Arc<HostExecutor>,
    /// A container's facts (its cgroups, whether it still exists after its command was
    /// killed) and the pids-limit room a kill may need; never used to start commands.
    pub engine: Arc<dyn Engine>,
}

impl Executors {
    /// The executor for processes at `place`.
    pub fn of(&self, place: &Place) -> Arc<dyn Executor> {
        match place {
            Place::Container(_) => self.sandbox.clone(),
            Place::Host => self.host.clone(),
        }
    }

    /// Which transport ran the exec `exec_id` at `place`, as `/metrics` labels it: `host`,
    /// `helper` (the helper's exec ids are `helper-N`, docs/helper.md), or `exec` (one engine
    /// exec, also when the helper handed a command to the engine).
    pub fn transport_of(place: &Place, exec_id: &str) -> &'static str {
        match place {
            Place::Host => "host",
            Place::Container(_) if exec_id.starts_with("helper-") => "helper",
            Place::Container(_) => "exec",
        }
    }

    /// How `l` runs at `place`: each place builds its own wrapper around it (a container's in
    /// `script`, the host's in `host::wrap`).
    pub fn wrap(&self, place: &Place, l: &Launch) -> Wrapping {
        match place {
            Place::Container(_) => super::script::container_wrap(l),
            Place::Host => self.host.wrap(l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transport_is_told_by_place_and_exec_id() {
        let c = Place::Container("moat-a".into());
        assert_eq!(Executors::transport_of(&c, "helper-12"), "helper");
        assert_eq!(Executors::transport_of(&c, "4f0c9e1d2a"), "exec");
        assert_eq!(Executors::transport_of(&Place::Host, "helper-1"), "host");
    }
}
