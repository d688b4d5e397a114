//! `sandbox.shell` and `elevated.shell`: the login shell a command runs in.

use serde::{Deserialize, Serialize};

/// The login shell a command runs in (`sandbox.shell`, `elevated.shell`). Only these two: the
/// wrapper passes the command as `-lc` text, which both read the same way.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Shell {
    /// `sh -lc`: whatever the image's `/bin/sh` is (dash on Debian).
    #[default]
    Sh,
    /// `bash -lc`: arrays, `[[ ]]`, `set -o pipefail` and the rest agents expect.
    Bash,
}

impl Shell {
    /// The program name, looked up on the wrapper's PATH.
    pub fn name(self) -> &'static str {
        match self {
            Shell::Sh => "sh",
            Shell::Bash => "bash",
        }
    }
}
