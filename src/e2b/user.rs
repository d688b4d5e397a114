//! Who an E2B call runs as (docs/e2b.md, "Users"): E2B names a user per call
//! (`Authorization: Basic base64("<user>:")`); moat knows the two users E2B's base template
//! has. No user, or `user`, is the sandbox's own user (uid 1000, named `user` in the base
//! template); `root` is uid 0, which every E2B sandbox may become. Any other name is refused as
//! E2B refuses it, `unauthenticated` with `invalid username`.

use crate::config::e2b::HOME;

/// One of the users a call may run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// The sandbox's own user, the default.
    Sandbox,
    /// Root (uid 0).
    Root,
}

impl User {
    /// The user `name` asks for (`None`: none asked).
    pub fn named(name: Option<&str>) -> Result<User, String> {
        match name {
            None | Some("user") => Ok(User::Sandbox),
            Some("root") => Ok(User::Root),
            Some(other) => Err(format!(
                "invalid username: '{}'",
                crate::output::escape_display(&other.chars().take(64).collect::<String>())
            )),
        }
    }

    /// The name E2B gives it (`USER`, `LOGNAME`).
    pub fn name(self) -> &'static str {
        match self {
            User::Sandbox => "user",
            User::Root => "root",
        }
    }

    /// Its home: the default working directory, and what `~` and relative paths mean.
    pub fn home(self) -> &'static str {
        match self {
            User::Sandbox => HOME,
            User::Root => "/root",
        }
    }

    /// The container user moat's exec names (`None`: the container's own).
    pub fn exec_user(self) -> Option<String> {
        match self {
            User::Sandbox => None,
            User::Root => Some("0".into()),
        }
    }

    /// The variables E2B's daemon sets for the user, below the sandbox's and the call's own.
    pub fn env(self) -> [(&'static str, &'static str); 3] {
        [
            ("HOME", self.home()),
            ("USER", self.name()),
            ("LOGNAME", self.name()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_users() {
        assert_eq!(User::named(None), Ok(User::Sandbox));
        assert_eq!(User::named(Some("user")), Ok(User::Sandbox));
        assert_eq!(User::named(Some("root")), Ok(User::Root));
        assert_eq!(User::Root.exec_user().as_deref(), Some("0"));
        assert_eq!(User::Sandbox.exec_user(), None);
        assert_eq!(User::Sandbox.home(), "/home/user");
        for bad in ["root123", "sandbox", "", "Root", "0"] {
            let e = User::named(Some(bad)).unwrap_err();
            assert!(e.starts_with("invalid username"), "{bad}: {e}");
        }
        assert!(!User::named(Some("a\u{1b}[2J"))
            .unwrap_err()
            .contains('\u{1b}'));
    }
}
