//! `elevated.user`: the user host commands run as (docs/security.md, "The operator channel").
//!
//! moat's wrapper stays moat's user (it writes the run files and the exit status); only the
//! command is started through `moat __run-as`, which drops to this user (supplementary groups,
//! then group, then user, real, effective and saved alike) and then execs the command. A user
//! other than moat's own cannot enter the 0700 `$MOAT_HOME`, so it cannot open the socket,
//! read the operator token in `moat.toml` or write `state.db`.

use std::ffi::CString;

use nix::unistd::{Gid, Uid};

/// The hidden subcommand that drops privileges and execs the rest of its argv.
pub const RUN_AS_SUBCOMMAND: &str = "__run-as";

/// Who host commands run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// Real, effective and saved user id of the command.
    pub uid: u32,
    /// Real, effective and saved group id of the command.
    pub gid: u32,
    /// Supplementary groups: the account's groups for a named user, none for a bare uid (so
    /// nothing of moat's own groups, such as `docker`, is carried over).
    pub groups: Vec<u32>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RunAsError {
    #[error(
        "use elevated.user `{0}`: no such user on this machine (give a name, a uid or uid:gid)"
    )]
    Unknown(String),
    #[error("use elevated.user `{0}`: write a name, a uid or uid:gid")]
    Syntax(String),
    #[error("use elevated.user `{0}`: it is root, which keeps every power over moat; name an unprivileged user")]
    Root(String),
    #[error("use elevated.user `{0}`: it is moat's own user, so host commands could still reach moat's home, socket and token; name another user")]
    Own(String),
}

impl RunAs {
    /// Resolves `spec`: `name`, `uid` or `uid:gid`. An empty spec means "not configured".
    /// A named user gets its account's primary and supplementary groups; a bare uid its
    /// account's group when one exists, else the gid equal to the uid.
    pub fn resolve(spec: &str) -> Result<Option<RunAs>, RunAsError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Ok(None);
        }
        let syntax = || RunAsError::Syntax(spec.to_string());
        let r = if let Some((u, g)) = spec.split_once(':') {
            let uid = u.parse::<u32>().map_err(|_| syntax())?;
            let gid = g.parse::<u32>().map_err(|_| syntax())?;
            RunAs {
                uid,
                gid,
                groups: Vec::new(),
            }
        } else if let Ok(uid) = spec.parse::<u32>() {
            let gid = nix::unistd::User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or(uid, |u| u.gid.as_raw());
            RunAs {
                uid,
                gid,
                groups: Vec::new(),
            }
        } else {
            let user = nix::unistd::User::from_name(spec)
                .ok()
                .flatten()
                .ok_or_else(|| RunAsError::Unknown(spec.to_string()))?;
            let name = CString::new(spec).map_err(|_| syntax())?;
            let groups = nix::unistd::getgrouplist(&name, user.gid)
                .map(|g| g.into_iter().map(Gid::as_raw).collect())
                .unwrap_or_default();
            RunAs {
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
                groups,
            }
        };
        if r.uid == 0 {
            return Err(RunAsError::Root(spec.to_string()));
        }
        if r.uid == nix::unistd::geteuid().as_raw() {
            return Err(RunAsError::Own(spec.to_string()));
        }
        Ok(Some(r))
    }

    /// The argv prefix that runs what follows it as this user: `exe __run-as UID GID GROUPS --`.
    pub fn helper_argv(&self, exe: &str) -> Vec<String> {
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        vec![
            exe.to_string(),
            RUN_AS_SUBCOMMAND.to_string(),
            self.uid.to_string(),
            self.gid.to_string(),
            groups.join(","),
            "--".to_string(),
        ]
    }
}

/// Parses the groups argument of the helper (comma-separated, may be empty).
pub fn parse_groups(text: &str) -> Result<Vec<u32>, std::num::ParseIntError> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect()
}

/// Drops to `uid`/`gid`/`groups` for good and execs `argv`. Returns only on failure, with
/// what failed. Call it before any thread is started.
pub fn exec_as(uid: u32, gid: u32, groups: &[u32], argv: &[String]) -> String {
    const NEEDS: &str = "moat needs root, or CAP_SETUID and CAP_SETGID, to use elevated.user";
    let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
    let groups: Vec<Gid> = groups.iter().copied().map(Gid::from_raw).collect();
    if let Err(e) = nix::unistd::setgroups(&groups) {
        return format!("set the supplementary groups: {e} ({NEEDS})");
    }
    if let Err(e) = nix::unistd::setresgid(g, g, g) {
        return format!("switch to gid {gid}: {e} ({NEEDS})");
    }
    if let Err(e) = nix::unistd::setresuid(u, u, u) {
        return format!("switch to uid {uid}: {e} ({NEEDS})");
    }
    // Never trust a drop that could be undone.
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        return "drop privileges: root could be regained after the switch".into();
    }
    let args: Result<Vec<CString>, _> = argv.iter().map(|a| CString::new(a.as_str())).collect();
    let Ok(args) = args else {
        return "run the command: an argument contains a NUL byte".into();
    };
    let Some(program) = args.first() else {
        return "run the command: nothing to run".into();
    };
    match nix::unistd::execvp(program, &args) {
        Ok(never) => match never {},
        Err(e) => format!("run `{}`: {e}", argv[0]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(RunAs::resolve("").unwrap(), None);
        assert_eq!(RunAs::resolve("  ").unwrap(), None);
        assert_eq!(
            RunAs::resolve("64123:64124").unwrap(),
            Some(RunAs {
                uid: 64123,
                gid: 64124,
                groups: vec![]
            })
        );
        // An unused uid without an account: its gid is the uid.
        assert_eq!(RunAs::resolve("64123").unwrap().unwrap().gid, 64123);
        assert!(matches!(RunAs::resolve("0:0"), Err(RunAsError::Root(_))));
        assert!(matches!(RunAs::resolve("root"), Err(RunAsError::Root(_))));
        assert!(matches!(
            RunAs::resolve("no-such-user-moat"),
            Err(RunAsError::Unknown(_))
        ));
        assert!(matches!(RunAs::resolve("1:x"), Err(RunAsError::Syntax(_))));
        assert!(matches!(RunAs::resolve("-1:2"), Err(RunAsError::Syntax(_))));
        let me = nix::unistd::geteuid().as_raw();
        if me != 0 {
            assert!(matches!(
                RunAs::resolve(&me.to_string()),
                Err(RunAsError::Own(_))
            ));
        }
    }

    #[test]
    fn helper_argv_and_groups_round_trip() {
        let r = RunAs {
            uid: 5,
            gid: 6,
            groups: vec![7, 8],
        };
        let a = r.helper_argv("/usr/bin/moat");
        assert_eq!(a, ["/usr/bin/moat", "__run-as", "5", "6", "7,8", "--"]);
        assert_eq!(parse_groups(&a[4]).unwrap(), vec![7, 8]);
        assert_eq!(parse_groups("").unwrap(), Vec::<u32>::new());
        assert!(parse_groups("1,x").is_err());
    }
}
