//! One table of environment names for both judges of a request's env (docs/security.md,
//! "Environment: an allowlist"; docs/policy.md, "Request env").
//!
//! Two judges read it. The policy (`policy::env`) judges a request's env under `security =
//! allowlist`, in the sandbox and on the host alike, and the names an operator adds to
//! `policy.*.env_allow`. The host executor (`host::env`) judges every host command's env and
//! the names an operator adds to `elevated.env_allow`. A name one judge refuses and the other
//! lets through reaches a program all the same, so both read their lists from here: the short
//! built-in list a request may always set (with a rule for each value), and the families that
//! change what a program loads or runs, which neither judge lets a request or an operator set.
//! Where the judges differ on purpose, the entry says so and why ([`Refused::host_only`]);
//! `host::env`'s tests check that every entry is judged the same by both, but for exactly
//! those differences.

/// What a built-in name's value may contain. Values are checked because a name alone is not
/// enough: `LANG=/tmp/x` makes glibc load locale files from a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRule {
    /// A locale name: letters, digits and `_.@-`, at most 64 bytes.
    Locale,
    /// A zone name such as `Europe/Paris` or `UTC+2`: no leading `/` or `:` (a file path),
    /// no `..`.
    Zone,
    /// A terminal type: letters, digits and `_.+-`.
    Term,
    /// A decimal number below 100000.
    Number,
    /// A short display flag: letters, digits and `_.,:=+-`, at most 64 bytes.
    Flag,
}

/// Names a request may always set, on either side: they change how output looks, never what
/// runs. Compared exactly (these are the names programs read).
pub const BUILT_IN: &[(&str, ValueRule)] = &[
    ("LANG", ValueRule::Locale),
    ("LANGUAGE", ValueRule::Flag),
    ("LC_ALL", ValueRule::Locale),
    ("LC_ADDRESS", ValueRule::Locale),
    ("LC_COLLATE", ValueRule::Locale),
    ("LC_CTYPE", ValueRule::Locale),
    ("LC_IDENTIFICATION", ValueRule::Locale),
    ("LC_MEASUREMENT", ValueRule::Locale),
    ("LC_MESSAGES", ValueRule::Locale),
    ("LC_MONETARY", ValueRule::Locale),
    ("LC_NAME", ValueRule::Locale),
    ("LC_NUMERIC", ValueRule::Locale),
    ("LC_PAPER", ValueRule::Locale),
    ("LC_TELEPHONE", ValueRule::Locale),
    ("LC_TIME", ValueRule::Locale),
    ("TZ", ValueRule::Zone),
    ("TERM", ValueRule::Term),
    ("COLORTERM", ValueRule::Flag),
    ("COLUMNS", ValueRule::Number),
    ("LINES", ValueRule::Number),
    ("NO_COLOR", ValueRule::Flag),
    ("FORCE_COLOR", ValueRule::Flag),
    ("CLICOLOR", ValueRule::Flag),
    ("CLICOLOR_FORCE", ValueRule::Flag),
];

/// Names a host command inherits from moat's own environment on top of [`BUILT_IN`]: they
/// describe the account the command runs as, and a request can never set them.
pub const ACCOUNT: &[&str] = &["HOME", "USER", "LOGNAME"];

/// The rule for `name`'s value, if `name` is built in.
pub fn built_in(name: &str) -> Option<ValueRule> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// Why `value` does not fit `rule`, if it does not: a phrase that follows "the value of X".
pub fn value_problem(rule: ValueRule, value: &str) -> Option<&'static str> {
    let only = |extra: &str, max: usize| {
        value.len() <= max
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let ok = match rule {
        ValueRule::Locale => only("_.@-", 64),
        ValueRule::Zone => {
            only("_+-/:.", 64)
                && !value.starts_with('/')
                && !value.starts_with(':')
                && !value.contains("..")
        }
        ValueRule::Term => only("_.+-", 64),
        ValueRule::Number => {
            !value.is_empty() && value.len() <= 5 && value.chars().all(|c| c.is_ascii_digit())
        }
        ValueRule::Flag => only("_.,:=+-", 64),
    };
    (!ok).then_some(match rule {
        ValueRule::Locale => "is not a locale name (letters, digits and `_.@-`)",
        ValueRule::Zone => "is not a zone name (no file path, no `..`)",
        ValueRule::Term => "is not a terminal type (letters, digits and `_.+-`)",
        ValueRule::Number => "is not a number below 100000",
        ValueRule::Flag => "is not a short setting (letters, digits and `_.,:=+-`)",
    })
}

/// Which names a [`Refused`] entry covers, compared upper-cased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// This name only.
    Exact(&'static str),
    /// Every name starting with this (`LD_` covers `LD_PRELOAD`).
    Prefix(&'static str),
    /// Every name ending with this (`_OPTIONS` covers `TAR_OPTIONS`).
    Suffix(&'static str),
}

impl Names {
    /// Whether the upper-cased `name` is covered.
    fn covers(self, upper: &str) -> bool {
        match self {
            Names::Exact(n) => upper == n,
            Names::Prefix(p) => upper.starts_with(p),
            Names::Suffix(s) => upper.ends_with(s),
        }
    }
}

/// One family of names neither a request nor an operator may set.
#[derive(Debug, Clone, Copy)]
pub struct Refused {
    /// The names it covers.
    pub names: Names,
    /// What the names are, for the refusal (`git settings`).
    pub why: &'static str,
    /// `Some(reason)` when only the host executor refuses the family, and why the policy
    /// need not; `None` (nearly every entry) when both refuse it.
    pub host_only: Option<&'static str>,
}

/// Who is judging a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// The policy: a request's env under `security = allowlist`, and `policy.*.env_allow`.
    Policy,
    /// The host executor: a host command's env, and `elevated.env_allow`.
    Host,
}

const fn exact(name: &'static str, why: &'static str) -> Refused {
    Refused {
        names: Names::Exact(name),
        why,
        host_only: None,
    }
}

const fn prefix(p: &'static str, why: &'static str) -> Refused {
    Refused {
        names: Names::Prefix(p),
        why,
        host_only: None,
    }
}

const fn suffix(s: &'static str, why: &'static str) -> Refused {
    Refused {
        names: Names::Suffix(s),
        why,
        host_only: None,
    }
}

/// Why credential names are refused on the host only: a host command inherits the names in
/// `elevated.env_allow` from moat's own environment, where a `*_TOKEN` is the operator's, so
/// allowing one would hand the operator's credential to a command the agent started
/// (credentials reach host commands as secrets instead). A sandbox request only sets a value
/// of its own, and nothing of moat's environment reaches a sandbox: there such a name is an
/// ordinary miss.
const INHERITED_CREDENTIAL: &str = "host commands inherit it from moat's own environment, where it holds the operator's credential; a sandbox request only sets its own value";

/// The families, exact names first, then prefixes, then suffixes: a name is refused with the
/// first entry that covers it. The union of what each judge refused before they shared it.
pub const REFUSED: &[Refused] = &[
    exact("PATH", "it decides which programs run"),
    exact("HOME", "shells and tools read their startup files from it"),
    exact("USER", "the account a command runs as"),
    exact("LOGNAME", "the account a command runs as"),
    exact("SHELL", "programs run it as a shell"),
    exact("ZDOTDIR", "zsh startup files"),
    exact("ENV", "shell startup code"),
    exact("BASH_ENV", "shell startup code"),
    exact("KSH_ENV", "shell startup code"),
    exact("BASHOPTS", "shell options"),
    exact("SHELLOPTS", "shell options"),
    exact("IFS", "how a shell splits words"),
    exact("CDPATH", "where a shell's cd looks"),
    exact("FPATH", "shell function search path"),
    exact("GLOBIGNORE", "how a shell expands patterns"),
    exact("PROMPT_COMMAND", "shell code run at every prompt"),
    exact("PS1", "a prompt, expanded as shell code"),
    exact("PS2", "a prompt, expanded as shell code"),
    exact("PS3", "a prompt, expanded as shell code"),
    exact("PS4", "a prompt, expanded as shell code"),
    exact("BROWSER", "programs run as a browser"),
    exact("EDITOR", "programs run as an editor"),
    exact("VISUAL", "programs run as an editor"),
    exact("FCEDIT", "programs run as an editor"),
    exact("PAGER", "programs run as a pager"),
    exact("MANPAGER", "programs run as a pager"),
    exact("TMPDIR", "where programs create and run temporary files"),
    exact("GCONV_PATH", "glibc loads conversion modules from it"),
    exact("LOCPATH", "glibc loads locale data from it"),
    exact("NLSPATH", "message catalogues"),
    exact("HOSTALIASES", "name resolution"),
    exact("RESOLV_HOST_CONF", "name resolution"),
    exact("TERMINFO", "terminal descriptions"),
    exact("TERMINFO_DIRS", "terminal descriptions"),
    exact("TERMCAP", "terminal descriptions"),
    exact("CC", "the compiler a build runs"),
    exact("CXX", "the compiler a build runs"),
    exact("CPP", "the preprocessor a build runs"),
    exact("LD", "the linker a build runs"),
    exact("AR", "the archiver a build runs"),
    exact("MAKEFLAGS", "make options"),
    exact("MFLAGS", "make options"),
    exact("MAKELEVEL", "make's recursion state"),
    exact("CONFIG_SITE", "configure scripts source it"),
    exact("CONFIG_SHELL", "the shell configure scripts run"),
    exact("EXINIT", "editor startup commands"),
    exact("VIMINIT", "editor startup commands"),
    exact("MYVIMRC", "editor startup commands"),
    exact("GVIMINIT", "editor startup commands"),
    exact("INPUTRC", "readline startup file"),
    exact("CLASSPATH", "where java loads classes"),
    exact("SSLKEYLOGFILE", "TLS libraries write session keys to it"),
    prefix("LD_", "dynamic loader settings"),
    prefix("DYLD_", "dynamic loader settings"),
    prefix("GLIBC_", "glibc tunables"),
    prefix("MALLOC_", "allocator settings"),
    prefix("BASH_FUNC_", "exported shell functions"),
    prefix("HIST", "shell history files"),
    prefix(
        "GIT_",
        "git settings (GIT_CONFIG_*, GIT_TRACE*, GIT_DIR, …)",
    ),
    prefix("PYTHON", "python settings"),
    prefix("PIP_", "pip settings"),
    prefix("UV_", "uv settings"),
    prefix("VIRTUAL_ENV", "python environments"),
    prefix("CONDA", "conda settings"),
    prefix("PERL", "perl settings"),
    prefix("RUBY", "ruby settings"),
    prefix("GEM_", "gem settings"),
    prefix("BUNDLE_", "bundler settings"),
    prefix("IRBRC", "irb startup files"),
    prefix("NODE_", "node settings"),
    prefix("NPM_", "npm settings"),
    prefix("YARN_", "yarn settings"),
    prefix("PNPM_", "pnpm settings"),
    prefix("BUN_", "bun settings"),
    prefix("DENO_", "deno settings"),
    prefix("LUA_", "lua settings"),
    prefix("PHP", "php settings"),
    prefix("JAVA", "java settings"),
    prefix("_JAVA", "java settings"),
    prefix("JDK_", "java settings"),
    prefix("MAVEN_", "maven settings"),
    prefix("GRADLE_", "gradle settings"),
    prefix("SBT_", "sbt settings"),
    prefix("ANT_", "ant settings"),
    prefix("DOTNET_", ".NET settings"),
    prefix("CORECLR_", ".NET settings"),
    prefix("CARGO", "cargo settings"),
    prefix("RUSTC", "rust settings"),
    prefix("RUSTDOC", "rust settings"),
    prefix("RUSTFLAGS", "rust settings"),
    prefix("RUSTUP_", "rustup settings"),
    prefix("GO", "go settings"),
    prefix("CGO_", "go settings"),
    prefix("R_", "R settings"),
    prefix("JULIA_", "julia settings"),
    prefix("ERL_", "erlang settings"),
    prefix("ELIXIR_", "elixir settings"),
    prefix("CMAKE_", "cmake settings"),
    prefix("EMACS", "emacs settings"),
    prefix("LESS", "less settings (LESSOPEN runs a program)"),
    prefix("TAR_", "tar settings"),
    prefix("ZSTD_", "compressor settings"),
    prefix("XZ_", "compressor settings"),
    prefix("GZIP", "compressor settings"),
    prefix("BZIP", "compressor settings"),
    prefix("SSH_", "ssh settings"),
    prefix("GPG", "gpg settings"),
    prefix("GNUPG", "gpg settings"),
    prefix("OPENSSL_", "openssl settings"),
    prefix("SSL_", "TLS trust settings"),
    prefix("CURL_", "curl settings"),
    prefix("WGET", "wget settings"),
    prefix("XDG_", "per-user configuration locations"),
    prefix("DOCKER_", "docker settings"),
    prefix("KUBE", "kubernetes settings"),
    prefix("HELM_", "helm settings"),
    prefix("ANSIBLE_", "ansible settings"),
    prefix("TF_", "terraform settings"),
    prefix("AWS_", "cloud credentials and settings"),
    prefix("AZURE_", "cloud credentials and settings"),
    prefix("SUDO_", "sudo settings"),
    prefix("MOAT_", "moat's own settings"),
    suffix(
        "_OPTIONS",
        "options a program parses as if given on its command line",
    ),
    suffix(
        "_OPTS",
        "options a program parses as if given on its command line",
    ),
    suffix("FLAGS", "compiler and linker options"),
    suffix("PATH", "search paths for code"),
    suffix("_HOME", "per-tool home directories"),
    suffix("_CONFIG", "configuration file locations"),
    suffix("RC", "startup files"),
    suffix("_INIT", "startup code"),
    suffix("_EDITOR", "programs run as an editor"),
    suffix("_PAGER", "programs run as a pager"),
    suffix("_SHELL", "programs run as a shell"),
    suffix("_COMMAND", "commands run by the tool"),
    suffix("_CMD", "commands run by the tool"),
    suffix("_ASKPASS", "programs run to ask for passwords"),
    suffix("_PROXY", "network proxies"),
    suffix("_PRELOAD", "libraries loaded into programs"),
    suffix("_PLUGINS", "plugin locations"),
    suffix("_HOOK", "hook programs"),
    suffix("_HOOKS", "hook programs"),
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_TOKEN", "credentials")
    },
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_KEY", "credentials")
    },
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_SECRET", "credentials")
    },
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_PASSWORD", "credentials")
    },
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_URL", "service locations and credentials")
    },
    Refused {
        host_only: Some(INHERITED_CREDENTIAL),
        ..suffix("_URI", "service locations and credentials")
    },
];

/// The entry that refuses `name` (compared case-insensitively) for `judge`, if one does.
pub fn refusal(name: &str, judge: Judge) -> Option<&'static Refused> {
    let upper = name.to_ascii_uppercase();
    REFUSED
        .iter()
        .filter(|r| judge == Judge::Host || r.host_only.is_none())
        .find(|r| r.names.covers(&upper))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_ordered_and_none_is_shadowed_or_built_in() {
        let rank = |n: Names| match n {
            Names::Exact(_) => 0,
            Names::Prefix(_) => 1,
            Names::Suffix(_) => 2,
        };
        for pair in REFUSED.windows(2) {
            assert!(rank(pair[0].names) <= rank(pair[1].names), "{pair:?}");
        }
        // An entry an earlier one already covers would never decide anything, and a
        // built-in name a family covers would be refused by one judge and passed by the other.
        for (i, r) in REFUSED.iter().enumerate() {
            let (Names::Exact(s) | Names::Prefix(s) | Names::Suffix(s)) = r.names;
            assert_eq!(s, s.to_ascii_uppercase(), "{r:?}");
            let sample = match r.names {
                Names::Exact(n) => n.to_owned(),
                Names::Prefix(p) => format!("{p}ZZ"),
                Names::Suffix(s) => format!("ZZ{s}"),
            };
            let first = REFUSED.iter().position(|e| e.names.covers(&sample));
            assert_eq!(first, Some(i), "{r:?} is shadowed by an earlier entry");
        }
        for (name, _) in BUILT_IN {
            assert!(refusal(name, Judge::Host).is_none(), "{name}");
        }
    }
}
