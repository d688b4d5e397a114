//! Where a command runs, named once: [`Machine`] is the host/sandbox word every other form
//! maps through; [`Target`] is where an exec request runs (and under which policy);
//! [`ApprovalTarget`] is its stored and wire form on an approval (plus `network`, a
//! connection's); [`Place`] is where a started process runs, by container name, as the
//! process index stores it. Pure.

use serde::{Deserialize, Serialize};

use super::text_enum::text_enum;

/// The machine a command runs on, as `details.host` (and the approval text's `Host:`) name
/// it: a host-full approval is on the host too, a network approval is the sandbox's
/// (`ApprovalTarget::machine`). The one host/sandbox word: every other name for the
/// machine ([`Target::machine`], [`Place::machine`]) goes through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Machine {
    /// The session's container.
    Sandbox,
    /// moat's own machine.
    Host,
}

impl Machine {
    /// The word as the wire writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Machine::Sandbox => "sandbox",
            Machine::Host => "host",
        }
    }
}

impl From<ApprovalTarget> for Machine {
    fn from(target: ApprovalTarget) -> Self {
        Target::of_approval(target).on()
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request runs and under which policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Sandbox,
    /// On the host; `full` skips the policy's allowlist and approvals (default_level full).
    Host {
        full: bool,
    },
}

impl Target {
    /// `sandbox` or `host`: the machine named in denial texts and the run-time allowlist's
    /// target (docs/approvals.md).
    pub fn machine(self) -> &'static str {
        self.on().as_str()
    }

    /// The machine the command runs on.
    pub fn on(self) -> Machine {
        match self {
            Target::Sandbox => Machine::Sandbox,
            Target::Host { .. } => Machine::Host,
        }
    }

    /// Where a stored approval's command runs; a network approval is the sandbox's.
    pub fn of_approval(target: ApprovalTarget) -> Self {
        match target {
            ApprovalTarget::Host => Target::Host { full: false },
            ApprovalTarget::HostFull => Target::Host { full: true },
            ApprovalTarget::Sandbox | ApprovalTarget::Network => Target::Sandbox,
        }
    }
}

/// What an approval for a command at this target is bound to (docs/approvals.md).
impl From<Target> for ApprovalTarget {
    fn from(target: Target) -> Self {
        match target {
            Target::Sandbox => ApprovalTarget::Sandbox,
            Target::Host { full: false } => ApprovalTarget::Host,
            Target::Host { full: true } => ApprovalTarget::HostFull,
        }
    }
}

text_enum!(
    /// What an approval is for: where the command runs, or a connection out of the sandbox.
    ApprovalTarget, "target", {
        /// A command in the session's container.
        Sandbox => "sandbox",
        /// A command on moat's machine under the host policy.
        Host => "host",
        /// A command on moat's machine with `default_level = full`.
        HostFull => "host-full",
        /// A connection the egress proxy asked about (docs/security.md, "Network egress").
        Network => "network",
    }
);

impl ApprovalTarget {
    /// Whether the command runs on moat's own machine, outside any container.
    pub fn on_host(self) -> bool {
        Machine::from(self) == Machine::Host
    }

    /// `host` for both host targets, `sandbox` otherwise: how agents and events name the
    /// machine, and which allowlist (per machine) allow-always writes to.
    pub fn machine(self) -> &'static str {
        Machine::from(self).as_str()
    }
}

/// Where a process runs. The process index stores it as text ([`Place::stored`]); everything
/// above the store matches on this instead of comparing container names with a magic value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// In a session container, by its engine name.
    Container(String),
    /// On this machine, through the host executor (docs/approvals.md, "The host executor").
    Host,
}

/// How the index records [`Place::Host`]. Never a container's name: moat names its containers
/// `moat-<slug>-<hash>` (`session::ContainerName`).
const HOST: &str = Machine::Host.as_str();

impl Place {
    /// The text kept in the process index's `container` column.
    pub fn stored(&self) -> &str {
        match self {
            Place::Container(name) => name,
            Place::Host => HOST,
        }
    }

    /// The place a stored row names (see [`Place::stored`]).
    pub fn from_stored(text: &str) -> Self {
        if text == HOST {
            Place::Host
        } else {
            Place::Container(text.to_string())
        }
    }

    /// The container's name; `None` on the host.
    pub fn container(&self) -> Option<&str> {
        match self {
            Place::Container(name) => Some(name),
            Place::Host => None,
        }
    }

    pub fn is_host(&self) -> bool {
        self.machine() == Machine::Host
    }

    /// The machine it runs on.
    pub fn machine(&self) -> Machine {
        match self {
            Place::Container(_) => Machine::Sandbox,
            Place::Host => Machine::Host,
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.stored())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one mapping between where a command runs and what its approval is bound to: every
    /// target goes to its own approval target and back, and a network approval is the
    /// sandbox's.
    #[test]
    fn targets_and_approval_targets_map_one_to_one() {
        for (target, approval, machine) in [
            (Target::Sandbox, ApprovalTarget::Sandbox, "sandbox"),
            (Target::Host { full: false }, ApprovalTarget::Host, "host"),
            (
                Target::Host { full: true },
                ApprovalTarget::HostFull,
                "host",
            ),
        ] {
            assert_eq!(ApprovalTarget::from(target), approval);
            assert_eq!(Target::of_approval(approval), target);
            assert_eq!(target.machine(), machine);
        }
        assert_eq!(
            Target::of_approval(ApprovalTarget::Network),
            Target::Sandbox
        );
    }

    /// The words are the store's and the approvals service's, as the wire pins them.
    #[test]
    fn words_are_the_wires() {
        for target in ApprovalTarget::ALL {
            let machine = Machine::from(*target);
            assert_eq!(machine.as_str(), target.machine());
            assert_eq!(serde_json::to_value(machine).unwrap(), target.machine());
        }
    }

    #[test]
    fn stored_text_round_trips() {
        for place in [Place::Host, Place::Container("moat-main-0a1b2c3d".into())] {
            assert_eq!(Place::from_stored(place.stored()), place);
        }
        assert_eq!(Place::Host.container(), None);
        assert_eq!(Place::Container("c".into()).container(), Some("c"));
    }
}
