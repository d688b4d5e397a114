//! The host's own wrapper argv ([`HostExecutor::wrap`]): the container's wrapper scripts
//! (`crate::wrapper`) with the host run directory passed as `$0`, the command marked as a host
//! command, and the login shell started through `elevated.user`'s prefix when one is set. The
//! registry hands every place the same [`Launch`]; this is the host's answer.

use super::executor::HostExecutor;
use super::lineage::HOST_MARKER;
use crate::config::Shell;
use crate::runtime::{Launch, Wrapping};
use crate::wrapper::{login_script, with_shell, PTY_WRAPPER, WRAPPER};

impl HostExecutor {
    /// How this machine runs `l`: the host wrapper (no stderr apart, no sticky state: host
    /// commands have neither), marked so moat can tell its descendants from the operator
    /// (docs/security.md, "The operator channel"), with run files of moat's own user.
    pub fn wrap(&self, l: &Launch) -> Wrapping {
        let mut env = l.env.clone();
        env.push(format!("{HOST_MARKER}={}", l.id));
        let argv = host_argv(
            &l.run_dir,
            &l.id,
            &l.command,
            l.pty,
            &self.run_as(),
            l.shell,
        );
        Wrapping {
            spec: l.spec(argv, env, None),
            owner: None,
            split_stderr: false,
            sticky: false,
        }
    }
}

/// The argv for a host process: the same wrappers, with the host run directory passed as `$0`
/// in place of the container's fixed mount (never pasted into the script text).
///
/// With a `run_as` prefix (`moat __run-as UID GID GROUPS --`, from `elevated.user`), the
/// wrapper stays moat's user and only the login shell starts through the prefix, which follows
/// the script as arguments `$3…`: the wrapper keeps writing the run files the command can no
/// longer reach, and the command's stdio are descriptors the wrapper opened.
fn host_argv(
    run_dir: &str,
    id: &str,
    command: &str,
    pty: bool,
    run_as: &[String],
    shell: Shell,
) -> Vec<String> {
    let wrapper = if pty { PTY_WRAPPER } else { WRAPPER };
    let mut wrapper = wrapper.replace("\"/run/moat/", "\"$0/");
    if !run_as.is_empty() {
        wrapper = if pty {
            wrapper.replace(
                r#"exec sh -lc "$2""#,
                r#"c=$2; shift 2; exec "$@" sh -lc "$c""#,
            )
        } else {
            wrapper.replace(
                r#"sh -lc "$2" >>"#,
                r#"( c=$2; shift 2; exec "$@" sh -lc "$c" ) >>"#,
            )
        };
    }
    let mut argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        with_shell(&wrapper, shell.name()),
        run_dir.into(),
        id.into(),
        login_script(command),
    ];
    argv.extend(run_as.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::RUN_DIR;

    #[test]
    fn host_wrapper_takes_the_dir_as_an_argument() {
        let a = host_argv("/h o'me/run", "id", "true", false, &[], Shell::Sh);
        assert!(!a[2].contains(RUN_DIR) && !a[2].contains("h o'me"));
        assert!(a[2].contains(r#""$0/$1.pid""#));
        assert_eq!(a[3], "/h o'me/run");
        assert_eq!(a.len(), 6);
    }

    /// Runs the host wrapper for real with a prefix that records its own argv: the login
    /// shell, and only it, starts through the prefix, and the run files are still written.
    #[test]
    fn host_wrapper_starts_only_the_command_through_run_as() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().display().to_string();
        std::fs::write(dir.path().join("p.in"), "").unwrap();
        // The "prefix": prints its arguments one per line into a file, then runs them.
        let prefix = vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            r#"printf '%s\n' "$@" > "$0"; exec "$@""#.to_string(),
            dir.path().join("seen").display().to_string(),
        ];
        for pty in [false, true] {
            let a = host_argv(&run, "p", "echo ran-$((1+1))", pty, &prefix, Shell::Sh);
            let out = std::process::Command::new(&a[0])
                .args(&a[1..])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
            let seen: Vec<&str> = seen.lines().collect();
            assert_eq!(seen[..2], ["sh", "-lc"], "pty={pty}: {seen:?}");
            assert!(seen.last().unwrap().ends_with("echo ran-$((1+1))"));
            assert!(std::fs::read_to_string(dir.path().join("p.pid")).is_ok());
            if pty {
                assert!(String::from_utf8_lossy(&out.stdout).contains("ran-2"));
            } else {
                let log = std::fs::read_to_string(dir.path().join("p.out")).unwrap();
                assert!(log.contains("ran-2"), "{log}");
                let exit = std::fs::read_to_string(dir.path().join("p.exit")).unwrap();
                assert_eq!(exit, "0");
            }
        }
    }

    #[test]
    fn bash_replaces_only_the_login_shell() {
        for pty in [false, true] {
            let h = host_argv("/r", "id", "true", pty, &["x".into()], Shell::Bash);
            assert!(h[2].contains(r#""$@" bash -lc "$c""#), "{}", h[2]);
            let h = host_argv("/r", "id", "true", pty, &[], Shell::Bash);
            assert_eq!(h[2].matches("bash -lc").count(), 1, "{}", h[2]);
        }
    }
}
