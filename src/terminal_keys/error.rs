//! Errors of key, hex and paste encoding.

/// Why some `send-keys` input could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key was empty or only whitespace.
    #[error("encode key {key:?}: the key name is empty")]
    Empty {
        /// The key as given.
        key: String,
    },
    /// The key name is not known.
    #[error(
        "encode key {key:?}: unknown key name (known: Enter, Tab, BTab, Escape, Space, BSpace, \
         Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1-F12, KP0-KP9, \
         KPEnter, a single character; modifiers C-, M-, S- and ^X)"
    )]
    Unknown {
        /// The key as given.
        key: String,
    },
    /// The key exists but cannot be sent with this modifier.
    #[error("encode key {key:?}: {modifier} cannot be combined with {base:?}")]
    Modifier {
        /// The key as given.
        key: String,
        /// `ctrl`, `shift` or `alt`.
        modifier: &'static str,
        /// The key without its modifiers.
        base: String,
    },
    /// A hex item is not a sequence of hex bytes.
    #[error(
        "decode hex item {item:?}: expected hex bytes such as \"1b\", \"0x1b\" or \"1b 5b 41\""
    )]
    Hex {
        /// The item as given.
        item: String,
    },
}
