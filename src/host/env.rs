//! The host env policy (SPEC §7): what a host command inherits from moat's own environment,
//! and which overrides a request may not make.
//!
//! Two lists matter. Keys that change how a shell, an interpreter or a tool loads code are
//! refused everywhere: they are dropped from the inherited environment and an override naming
//! one fails the request. Credentials and per-user settings are refused as overrides; of
//! those, credentials are also dropped from the inherited environment, so a token moat itself
//! holds never reaches a host command. Any refused override fails the whole request, naming
//! every refused key: nothing is dropped silently.

use std::collections::BTreeMap;

/// Refused as overrides and dropped when inherited.
const BLOCKED_EVERYWHERE: &[&str] = &[
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONHOME",
    "PYTHONPATH",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYLIB",
    "RUBYOPT",
    "BASH_ENV",
    "ENV",
    "BASHOPTS",
    "FPATH",
    "KSH_ENV",
    "TCLLIBPATH",
    "BROWSER",
    "GIT_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_EXEC_PATH",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_SEQUENCE_EDITOR",
    "GIT_TEMPLATE_DIR",
    "GIT_SSL_NO_VERIFY",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_HOOK_PATH",
    "CC",
    "CXX",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "RUSTC_WRAPPER",
    "CMAKE_C_COMPILER",
    "CMAKE_CXX_COMPILER",
    "CMAKE_TOOLCHAIN_FILE",
    "SHELL",
    "SHELLOPTS",
    "PS4",
    "GCONV_PATH",
    "IFS",
    "SSLKEYLOGFILE",
    "JAVA_OPTS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PYTHONBREAKPOINT",
    "DOTNET_STARTUP_HOOKS",
    "DOTNET_ADDITIONAL_DEPS",
    "GLIBC_TUNABLES",
    "MAVEN_OPTS",
    "MAKEFLAGS",
    "MFLAGS",
    "SBT_OPTS",
    "GRADLE_OPTS",
    "ANT_OPTS",
    "HGRCPATH",
    "EXINIT",
    "VIMINIT",
    "MYVIMRC",
    "GVIMINIT",
    "LUA_INIT",
    "LUA_INIT_5_1",
    "LUA_INIT_5_2",
    "LUA_INIT_5_3",
    "LUA_INIT_5_4",
    "EMACSLOADPATH",
    "RUBYSHELL",
    "SVN_EDITOR",
    "SVN_SSH",
    "BZR_EDITOR",
    "BZR_SSH",
    "BZR_PLUGIN_PATH",
    "SUDO_ASKPASS",
    "JULIA_EDITOR",
    "CONFIG_SITE",
    "CONFIG_SHELL",
    "CATALINA_OPTS",
    "CORECLR_PROFILER",
    "HELM_PLUGINS",
    "PACKER_PLUGIN_PATH",
    "VAGRANT_VAGRANTFILE",
    "ERL_AFLAGS",
    "ERL_FLAGS",
    "ERL_ZFLAGS",
    "ELIXIR_ERL_OPTIONS",
    "R_ENVIRON",
    "R_PROFILE",
    "R_ENVIRON_USER",
    "R_PROFILE_USER",
    "HOSTALIASES",
];

/// Prefixes refused as overrides and dropped when inherited (loader and shell-function hooks).
const BLOCKED_PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_"];

/// Credentials: refused as overrides and never inherited.
const CREDENTIALS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "DATABASE_URL",
    "REDIS_URL",
    "MONGODB_URI",
    "AMQP_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "HF_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "DOCKER_AUTH_CONFIG",
];

/// Refused as overrides, kept when inherited: they point tools at the operator's own setup.
const OVERRIDE_ONLY: &[&str] = &[
    "PATH",
    "HOME",
    "ZDOTDIR",
    "GRADLE_USER_HOME",
    "GIT_CONFIG",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "GIT_PAGER",
    "SSH_ASKPASS",
    "SSH_AUTH_SOCK",
    "LESSOPEN",
    "LESSCLOSE",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "FCEDIT",
    "SUDO_EDITOR",
    "PROMPT_COMMAND",
    "HISTFILE",
    "PERL5DB",
    "PERL5DBCMD",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "WGETRC",
    "CURL_HOME",
    "CLASSPATH",
    "CFLAGS",
    "LDFLAGS",
    "CGO_CFLAGS",
    "CGO_LDFLAGS",
    "GOFLAGS",
    "GOPROXY",
    "GONOSUMCHECK",
    "GONOSUMDB",
    "GONOPROXY",
    "GOPRIVATE",
    "GOENV",
    "GOPATH",
    "CORECLR_PROFILER_PATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "DENO_DIR",
    "BUN_CONFIG_REGISTRY",
    "YARN_RC_FILENAME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "DOCKER_HOST",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "DOCKER_CONTEXT",
    "PIP_INDEX_URL",
    "PIP_PYPI_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CONFIG_FILE",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_PYTHON",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "LIBRARY_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "RUSTFLAGS",
    "CARGO_HOME",
    "VIRTUAL_ENV",
    "LUA_PATH",
    "LUA_CPATH",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "COMPOSER_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_AUTH_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "KUBECONFIG",
    "HELM_HOME",
    "R_LIBS_USER",
    "TF_CLI_CONFIG_FILE",
    "TF_PLUGIN_CACHE_DIR",
    "ANSIBLE_CONFIG",
    "ANSIBLE_LIBRARY",
    "ANSIBLE_CALLBACK_PLUGINS",
    "ANSIBLE_COLLECTIONS_PATH",
    "ANSIBLE_CONNECTION_PLUGINS",
    "ANSIBLE_FILTER_PLUGINS",
    "ANSIBLE_INVENTORY_PLUGINS",
    "ANSIBLE_LOOKUP_PLUGINS",
    "ANSIBLE_MODULE_UTILS",
    "ANSIBLE_REMOTE_TEMP",
    "ANSIBLE_ROLES_PATH",
    "ANSIBLE_STRATEGY_PLUGINS",
];

/// Prefixes refused as overrides only (tool configuration injected through numbered keys).
const OVERRIDE_PREFIXES: &[&str] = &["GIT_CONFIG_", "NPM_CONFIG_", "CARGO_REGISTRIES_", "TF_VAR_"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HostEnvError(pub String);

fn blocked_everywhere(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    BLOCKED_EVERYWHERE.contains(&upper.as_str())
        || BLOCKED_PREFIXES.iter().any(|p| upper.starts_with(p))
}

fn is_credential(key: &str) -> bool {
    CREDENTIALS.contains(&key.to_ascii_uppercase().as_str())
}

/// Whether a request may set `key` for a host command.
pub fn override_allowed(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    !(blocked_everywhere(key)
        || is_credential(key)
        || OVERRIDE_ONLY.contains(&upper.as_str())
        || OVERRIDE_PREFIXES.iter().any(|p| upper.starts_with(p)))
}

/// Fails with `Security Violation: …` naming every override the host env policy refuses.
pub fn check_overrides(overrides: &BTreeMap<String, String>) -> Result<(), HostEnvError> {
    let mut refused: Vec<&str> = overrides
        .keys()
        .map(String::as_str)
        .filter(|k| !override_allowed(k))
        .collect();
    refused.sort_unstable();
    match refused.as_slice() {
        [] => Ok(()),
        ["PATH"] => Err(HostEnvError(
            "Security Violation: Custom 'PATH' variable is forbidden during host execution.".into(),
        )),
        [one] => Err(HostEnvError(format!(
            "Security Violation: Environment variable '{one}' is forbidden during host execution."
        ))),
        many => Err(HostEnvError(format!(
            "Security Violation: environment variables forbidden during host execution: {}.",
            many.join(", ")
        ))),
    }
}

/// The part of moat's own environment a host command inherits: code-loading keys,
/// credentials and moat's own `MOAT_*` settings are left out.
pub fn inherited(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, _)| !blocked_everywhere(k) && !is_credential(k) && !k.starts_with("MOAT_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter().map(|k| (k.to_string(), "x".into())).collect()
    }

    #[test]
    fn overrides_are_refused_by_name() {
        let rows: &[(&[&str], Option<&str>)] = &[
            (&["FOO", "LANG"], None),
            (&["PATH"], Some("Custom 'PATH' variable")),
            (&["LD_PRELOAD"], Some("'LD_PRELOAD'")),
            (&["BASH_ENV"], Some("'BASH_ENV'")),
            (&["GIT_CONFIG_COUNT"], Some("'GIT_CONFIG_COUNT'")),
            (&["DYLD_INSERT_LIBRARIES"], Some("'DYLD_INSERT_LIBRARIES'")),
            (&["BASH_FUNC_ls%%"], Some("'BASH_FUNC_ls%%'")),
            (&["HOME"], Some("'HOME'")),
            (&["GITHUB_TOKEN"], Some("'GITHUB_TOKEN'")),
            (&["HTTPS_PROXY"], Some("'HTTPS_PROXY'")),
            (&["ld_preload"], Some("'ld_preload'")),
            (
                &["PATH", "LD_PRELOAD", "BASH_ENV", "GIT_CONFIG_COUNT", "OK"],
                Some("host execution: BASH_ENV, GIT_CONFIG_COUNT, LD_PRELOAD, PATH."),
            ),
        ];
        for (keys, want) in rows {
            match (check_overrides(&env(keys)), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => {
                    assert!(e.0.starts_with("Security Violation: "), "{e}");
                    assert!(e.0.contains(w), "{keys:?}: {e}");
                }
                (r, w) => panic!("{keys:?}: got {r:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn inherited_env_drops_loaders_credentials_and_moat_settings() {
        let vars = [
            "PATH",
            "HOME",
            "LANG",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "LD_PRELOAD",
            "BASH_ENV",
            "MOAT_HOME",
            "SSH_AUTH_SOCK",
        ]
        .map(|k| (k.to_string(), "v".to_string()));
        let kept: Vec<String> = inherited(vars).into_keys().collect();
        assert_eq!(kept, ["HOME", "LANG", "PATH", "SSH_AUTH_SOCK"]);
    }
}
