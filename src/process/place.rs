//! [`Place`]: where a process runs, which decides the executor that starts it and watches it.

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
const HOST: &str = "host";

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
        matches!(self, Place::Host)
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

    #[test]
    fn stored_text_round_trips() {
        for place in [Place::Host, Place::Container("moat-main-0a1b2c3d".into())] {
            assert_eq!(Place::from_stored(place.stored()), place);
        }
        assert_eq!(Place::Host.container(), None);
        assert_eq!(Place::Container("c".into()).container(), Some("c"));
    }
}
