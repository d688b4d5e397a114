//! The messages of E2B's process and filesystem services and control plane, as moat reads and writes them
//! (docs/e2b.md, "What is served"). Proto3's JSON mapping: lowerCamel names (snake_case
//! accepted too), enums by name or number, `bytes` as standard base64.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize};

/// `bytes` fields: standard base64, with padding or without.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn from_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let text = text.trim_end_matches('=');
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("not base64: {e}")))
}

/// A number proto3 may send as a JSON number or a string.
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Num(u32),
        Text(String),
    }
    match Option::<N>::deserialize(d)? {
        None => Ok(None),
        Some(N::Num(n)) => Ok(Some(n)),
        Some(N::Text(t)) => t
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}` is not a number"))),
    }
}

/// What to run: `cmd` with `args`, extra `envs`, in `cwd`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Size {
    pub cols: u16,
    pub rows: u16,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Pty {
    pub size: Size,
}

/// `Start`'s request.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct StartRequest {
    pub process: ProcessConfig,
    pub pty: Option<Pty>,
    pub tag: Option<String>,
    /// Whether the process gets a stdin pipe; unset means yes.
    pub stdin: Option<bool>,
}

/// Which process a call means: by the pid the container sees, or by the tag it started with.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Selector {
    #[serde(deserialize_with = "number")]
    pub pid: Option<u32>,
    pub tag: Option<String>,
}

/// The requests that name one process and nothing else (`Connect`, `CloseStdin`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProcessRequest {
    pub process: Selector,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct UpdateRequest {
    pub process: Selector,
    pub pty: Option<Pty>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Input {
    #[serde(deserialize_with = "from_b64")]
    pub stdin: Option<Vec<u8>>,
    #[serde(deserialize_with = "from_b64")]
    pub pty: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct SendInputRequest {
    pub process: Selector,
    pub input: Input,
}

/// One message of a `StreamInput` stream: the process first, then input or keepalives.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct StreamInputRequest {
    pub start: Option<ProcessRequest>,
    pub data: Option<InputData>,
    pub keepalive: Option<serde_json::Value>,
}

/// A `StreamInput` message's input.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct InputData {
    pub input: Input,
}

/// The two signals E2B's SDK sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum S {
            Num(i64),
            Name(String),
        }
        match S::deserialize(d)? {
            S::Num(15) => Ok(Signal::Term),
            S::Num(9) => Ok(Signal::Kill),
            S::Name(n) if n == "SIGNAL_SIGTERM" => Ok(Signal::Term),
            S::Name(n) if n == "SIGNAL_SIGKILL" => Ok(Signal::Kill),
            S::Num(n) => Err(serde::de::Error::custom(format!(
                "signal {n} is not SIGTERM (15) or SIGKILL (9)"
            ))),
            S::Name(n) => Err(serde::de::Error::custom(format!(
                "signal `{}` is not SIGNAL_SIGTERM or SIGNAL_SIGKILL",
                crate::output::escape_display(&n)
            ))),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct SendSignalRequest {
    #[serde(default)]
    pub process: Selector,
    pub signal: Signal,
}

/// One event of a process's stream.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Event {
    Start { pid: u32 },
    Data(Data),
    End(End),
    Keepalive {},
}

/// A chunk of output, raw.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Data {
    Stdout(String),
    Stderr(String),
    Pty(String),
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct End {
    /// -1 when a signal ended it.
    pub exit_code: i32,
    pub exited: bool,
    /// `exit status N` or `signal: killed`, as E2B's daemon words it.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `{"event": …}`: what each streamed message is.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventMessage {
    pub event: Event,
}

/// One process in `List`'s answer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessInfo {
    pub config: ProcessConfig,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The filesystem service's requests that name one path (`Stat`, `MakeDir`, `Remove`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct PathRequest {
    pub path: String,
}

/// `ListDir`'s request: 0 (unset) is 1 level.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ListDirRequest {
    pub path: String,
    #[serde(deserialize_with = "number")]
    pub depth: Option<u32>,
}

/// `Move`'s request.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct MoveRequest {
    pub source: String,
    pub destination: String,
}

/// The body of `create` (`POST /sandboxes`, `POST /v2/sandboxes`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct CreateRequest {
    #[serde(alias = "templateID", alias = "template_id")]
    pub template_id: Option<String>,
    pub timeout: Option<u64>,
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(alias = "env_vars")]
    pub env_vars: Option<BTreeMap<String, String>>,
    pub secure: Option<bool>,
    #[serde(alias = "allow_internet_access")]
    pub allow_internet_access: Option<bool>,
}

/// The body of `connect` and `set_timeout`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimeoutRequest {
    pub timeout: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_either_spelling_and_events_write_protos_json() {
        let r: StartRequest = serde_json::from_str(
            r#"{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"}},"stdin":false,"pty":{"size":{"cols":80,"rows":24}}}"#,
        )
        .unwrap();
        assert_eq!(r.process.args[2], "echo hi");
        assert_eq!(r.stdin, Some(false));
        assert_eq!(r.pty.unwrap().size.rows, 24);
        let s: SendSignalRequest =
            serde_json::from_str(r#"{"process":{"pid":"42"},"signal":"SIGNAL_SIGKILL"}"#).unwrap();
        assert_eq!((s.process.pid, s.signal), (Some(42), Signal::Kill));
        let s: SendSignalRequest =
            serde_json::from_str(r#"{"process":{"pid":42},"signal":15}"#).unwrap();
        assert_eq!(s.signal, Signal::Term);
        let err = serde_json::from_str::<SendSignalRequest>(r#"{"signal":"SIGNAL_SIGSTOP"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("SIGNAL_SIGSTOP"), "{err}");
        let i: SendInputRequest =
            serde_json::from_str(r#"{"process":{"tag":"t"},"input":{"stdin":"aGk"}}"#).unwrap();
        assert_eq!(i.input.stdin.as_deref(), Some(&b"hi"[..]));
        assert!(serde_json::from_str::<SendInputRequest>(r#"{"input":{"stdin":"%%"}}"#).is_err());
        let c: CreateRequest =
            serde_json::from_str(r#"{"templateID":"base","timeout":30,"envVars":{"A":"b"}}"#)
                .unwrap();
        assert_eq!(c.template_id.as_deref(), Some("base"));
        assert_eq!(c.env_vars.unwrap()["A"], "b");

        let msg = |e| serde_json::to_string(&EventMessage { event: e }).unwrap();
        assert_eq!(
            msg(Event::Start { pid: 7 }),
            r#"{"event":{"start":{"pid":7}}}"#
        );
        assert_eq!(
            msg(Event::Data(Data::Stderr(b64(b"\xff\n")))),
            r#"{"event":{"data":{"stderr":"/wo="}}}"#
        );
        assert_eq!(
            msg(Event::End(End {
                exit_code: -1,
                exited: false,
                status: "signal: killed".into(),
                error: None
            })),
            r#"{"event":{"end":{"exitCode":-1,"exited":false,"status":"signal: killed"}}}"#
        );
        assert_eq!(msg(Event::Keepalive {}), r#"{"event":{"keepalive":{}}}"#);
    }
}
