//! `moat __run-as UID GID GROUPS -- ARGV…`: the hidden helper host commands start through
//! when `elevated.user` is set (docs/security.md, "The operator channel"). It is handled before
//! anything else (no argument parser, no threads), since changing ids must happen while the
//! process has one thread.

use std::process::ExitCode;

use super::term::say_err;

/// Exit status when the switch or the exec failed, like a shell's "cannot execute".
const FAILED: u8 = 126;

pub fn main(args: &[String]) -> ExitCode {
    let message = match args {
        [uid, gid, groups, dashdash, argv @ ..] if dashdash == "--" && !argv.is_empty() => {
            match (
                uid.parse::<u32>(),
                gid.parse::<u32>(),
                moat::host::parse_groups(groups),
            ) {
                (Ok(uid), Ok(gid), Ok(groups)) => moat::host::exec_as(uid, gid, &groups, argv),
                _ => "read the ids: expected UID GID GROUPS -- COMMAND…".to_string(),
            }
        }
        _ => "read the arguments: expected UID GID GROUPS -- COMMAND…".to_string(),
    };
    say_err!("moat: failed to run the host command as elevated.user: {message}");
    ExitCode::from(FAILED)
}
