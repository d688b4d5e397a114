//! A `process` call as the wire carries it ([`ProcessRequest`]: one flat object, docs/mcp.md,
//! "Tools": `process`) and as the tool acts on it ([`ProcessCall`]): the action parsed once,
//! into an enum holding only the fields that action reads.

use serde::{Deserialize, Serialize};

/// Parameters of one `process` call.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessRequest {
    pub action: String,
    /// The process the action is about. The wire calls it `sessionId` (docs/mcp.md, the
    /// `process` tool), a name kept for the agents already written against it.
    #[serde(default, rename = "sessionId")]
    pub process_id: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub eof: Option<bool>,
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    #[serde(default)]
    pub hex: Option<Vec<String>>,
    #[serde(default)]
    pub literal: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub bracketed: Option<bool>,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
    /// `log`: characters of line `offset` to skip, so a line longer than a page is read on
    /// where the last page stopped (docs/mcp.md, `process log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub char_offset: Option<usize>,
    /// Poll wait in ms, at most 120000.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The paired node the process runs on, for a process an `exec` with `host: "node"`
    /// started there (docs/nodes.md, "Calls").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Every action the tool knows (docs/mcp.md, "Tools": `process`), as the wire spells them.
pub const ACTIONS: &[&str] = &[
    "list",
    "poll",
    "log",
    "write",
    "send-keys",
    "submit",
    "paste",
    "kill",
    "clear",
    "remove",
];

/// The action names: the serde enum `action` is read into, spelled as [`ACTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ActionName {
    List,
    Poll,
    Log,
    Write,
    SendKeys,
    Submit,
    Paste,
    Kill,
    Clear,
    Remove,
}

impl ActionName {
    /// The action `text` names. Agents write `Poll` or ` poll `: the name is trimmed and
    /// lowercased first, as the tool has always accepted it.
    fn parse(text: &str) -> Option<Self> {
        let name = text.trim().to_ascii_lowercase();
        Self::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(&name))
            .ok()
    }
}

/// What one call does to its process, with the fields that action reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessAction {
    /// The output since the last poll, waiting up to `wait_ms` (capped at 120000) for some.
    Poll { wait_ms: u64 },
    /// A page of the whole record: from line `offset`, `limit` lines.
    Log {
        offset: Option<usize>,
        limit: Option<usize>,
        /// Characters of the first line to skip.
        char_offset: Option<usize>,
    },
    /// `data` to stdin, which is closed afterwards when `eof`.
    Write { data: String, eof: bool },
    /// Literal text, hex bytes and key names, sent in that order.
    SendKeys {
        literal: Option<String>,
        hex: Option<Vec<String>>,
        keys: Option<Vec<String>>,
    },
    /// A carriage return.
    Submit,
    /// `text` as one paste, between bracketed-paste markers when `bracketed`.
    Paste { text: String, bracketed: bool },
    /// Ends a running process's group.
    Kill,
    /// Forgets a finished process.
    Clear,
    /// Ends the process if it runs, then forgets it.
    Remove,
}

/// One parsed call.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessCall {
    /// The session's processes.
    List,
    /// `action` on the process `id` (trimmed, never empty).
    On { id: String, action: ProcessAction },
}

/// Why a call names nothing to do. The texts are the tool's own sentences (docs/mcp.md, the
/// `process` tool), which agents already read, not "failed to …" fragments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The action as sent; shown with its control and bidi characters escaped.
    #[error("Unknown action {}", crate::output::escape_display(.0))]
    UnknownAction(String),
    #[error("sessionId is required for this action.")]
    MissingId,
}

impl ProcessRequest {
    /// The call this request makes: an unknown action is refused first, then a missing or
    /// blank `sessionId` for every action but `list`. Fields an action does not read are
    /// accepted and ignored, as the flat wire object allows.
    pub fn parse(&self) -> Result<ProcessCall, CallError> {
        let name = ActionName::parse(&self.action)
            .ok_or_else(|| CallError::UnknownAction(self.action.clone()))?;
        let action = match name {
            ActionName::List => return Ok(ProcessCall::List),
            ActionName::Poll => ProcessAction::Poll {
                wait_ms: self.timeout.unwrap_or(0),
            },
            ActionName::Log => ProcessAction::Log {
                offset: self.offset,
                limit: self.limit,
                char_offset: self.char_offset,
            },
            ActionName::Write => ProcessAction::Write {
                data: self.data.clone().unwrap_or_default(),
                eof: self.eof == Some(true),
            },
            ActionName::SendKeys => ProcessAction::SendKeys {
                literal: self.literal.clone(),
                hex: self.hex.clone(),
                keys: self.keys.clone(),
            },
            ActionName::Submit => ProcessAction::Submit,
            ActionName::Paste => ProcessAction::Paste {
                text: self.text.clone().unwrap_or_default(),
                bracketed: self.bracketed != Some(false),
            },
            ActionName::Kill => ProcessAction::Kill,
            ActionName::Clear => ProcessAction::Clear,
            ActionName::Remove => ProcessAction::Remove,
        };
        let id = self
            .process_id
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or(CallError::MissingId)?;
        Ok(ProcessCall::On {
            id: id.to_string(),
            action,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request from its wire JSON, as MCP and HTTP read it.
    fn req(json: &str) -> ProcessRequest {
        serde_json::from_str(json).unwrap()
    }

    fn on(id: &str, action: ProcessAction) -> Result<ProcessCall, CallError> {
        Ok(ProcessCall::On {
            id: id.into(),
            action,
        })
    }

    #[test]
    fn every_action_parses_with_the_fields_it_reads() {
        let rows: Vec<(&str, Result<ProcessCall, CallError>)> = vec![
            (r#"{"action":"list"}"#, Ok(ProcessCall::List)),
            // list needs no id, and ignores one.
            (
                r#"{"action":"list","sessionId":"x"}"#,
                Ok(ProcessCall::List),
            ),
            (
                r#"{"action":"poll","sessionId":"warm-river"}"#,
                on("warm-river", ProcessAction::Poll { wait_ms: 0 }),
            ),
            (
                r#"{"action":"poll","sessionId":"a","timeout":500}"#,
                on("a", ProcessAction::Poll { wait_ms: 500 }),
            ),
            (
                r#"{"action":"log","sessionId":"a","offset":3,"limit":10}"#,
                on(
                    "a",
                    ProcessAction::Log {
                        offset: Some(3),
                        limit: Some(10),
                        char_offset: None,
                    },
                ),
            ),
            (
                r#"{"action":"log","sessionId":"a"}"#,
                on(
                    "a",
                    ProcessAction::Log {
                        offset: None,
                        limit: None,
                        char_offset: None,
                    },
                ),
            ),
            (
                r#"{"action":"write","sessionId":"a","data":"hi\n","eof":true}"#,
                on(
                    "a",
                    ProcessAction::Write {
                        data: "hi\n".into(),
                        eof: true,
                    },
                ),
            ),
            (
                r#"{"action":"write","sessionId":"a"}"#,
                on(
                    "a",
                    ProcessAction::Write {
                        data: String::new(),
                        eof: false,
                    },
                ),
            ),
            (
                r#"{"action":"send-keys","sessionId":"a","literal":"q","hex":["1b"],"keys":["Enter"]}"#,
                on(
                    "a",
                    ProcessAction::SendKeys {
                        literal: Some("q".into()),
                        hex: Some(vec!["1b".into()]),
                        keys: Some(vec!["Enter".into()]),
                    },
                ),
            ),
            (
                r#"{"action":"submit","sessionId":"a"}"#,
                on("a", ProcessAction::Submit),
            ),
            (
                r#"{"action":"paste","sessionId":"a","text":"x"}"#,
                on(
                    "a",
                    ProcessAction::Paste {
                        text: "x".into(),
                        bracketed: true,
                    },
                ),
            ),
            (
                r#"{"action":"paste","sessionId":"a","text":"x","bracketed":false}"#,
                on(
                    "a",
                    ProcessAction::Paste {
                        text: "x".into(),
                        bracketed: false,
                    },
                ),
            ),
            (
                r#"{"action":"kill","sessionId":"a"}"#,
                on("a", ProcessAction::Kill),
            ),
            (
                r#"{"action":"clear","sessionId":"a"}"#,
                on("a", ProcessAction::Clear),
            ),
            (
                r#"{"action":"remove","sessionId":"a"}"#,
                on("a", ProcessAction::Remove),
            ),
            // The name is trimmed and case-blind; the id is trimmed.
            (
                r#"{"action":"  Send-Keys ","sessionId":" a "}"#,
                on(
                    "a",
                    ProcessAction::SendKeys {
                        literal: None,
                        hex: None,
                        keys: None,
                    },
                ),
            ),
            (r#"{"action":"LIST"}"#, Ok(ProcessCall::List)),
            // Fields another action reads are accepted and ignored.
            (
                r#"{"action":"kill","sessionId":"a","data":"x","timeout":9}"#,
                on("a", ProcessAction::Kill),
            ),
        ];
        for (json, want) in rows {
            assert_eq!(req(json).parse(), want, "{json}");
        }
    }

    /// The refusals and their texts, byte for byte: an unknown action wins over a missing id.
    #[test]
    fn unknown_actions_and_missing_ids_keep_their_texts() {
        let rows = [
            (r#"{"action":"dance"}"#, "Unknown action dance"),
            (
                r#"{"action":"dance","sessionId":"a"}"#,
                "Unknown action dance",
            ),
            (r#"{"action":""}"#, "Unknown action "),
            (
                r#"{"action":"send_keys","sessionId":"a"}"#,
                "Unknown action send_keys",
            ),
            (
                r#"{"action":"po ll","sessionId":"a"}"#,
                "Unknown action po ll",
            ),
            (
                r#"{"action":"x\u001b[2J\u202e"}"#,
                "Unknown action x\\u{001b}[2J\\u{202e}",
            ),
            (
                r#"{"action":"poll"}"#,
                "sessionId is required for this action.",
            ),
            (
                r#"{"action":"kill","sessionId":"  "}"#,
                "sessionId is required for this action.",
            ),
            (
                r#"{"action":"write","sessionId":null}"#,
                "sessionId is required for this action.",
            ),
        ];
        for (json, text) in rows {
            let err = req(json).parse().unwrap_err();
            assert_eq!(err.to_string(), text, "{json}");
        }
        assert_eq!(
            req(r#"{"action":" Dance "}"#).parse(),
            Err(CallError::UnknownAction(" Dance ".into())),
            "the action is kept as sent"
        );
    }

    /// The list of names the HTTP refusal quotes and the enum agree.
    #[test]
    fn actions_are_the_enum_names() {
        for name in ACTIONS {
            let parsed = ActionName::parse(name).expect(name);
            assert_eq!(serde_json::to_value(parsed).unwrap(), *name);
        }
        let all = [
            ActionName::List,
            ActionName::Poll,
            ActionName::Log,
            ActionName::Write,
            ActionName::SendKeys,
            ActionName::Submit,
            ActionName::Paste,
            ActionName::Kill,
            ActionName::Clear,
            ActionName::Remove,
        ];
        assert_eq!(all.len(), ACTIONS.len());
    }
}
