//! The engine's own small model of a shell command.
//!
//! Only what allowlist mode can vouch for is representable: simple commands with literal
//! words, joined by `|`, `&&`, `||` and `;`, with a handful of harmless redirections. The
//! parser turns every other construct into a miss with a reason instead of modelling it.

use std::fmt;

/// How a segment connects to the one after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joiner {
    /// `|`: stdout feeds the next segment's stdin.
    Pipe,
    /// `&&`: the next segment runs if this one succeeded.
    And,
    /// `||`: the next segment runs if this one failed.
    Or,
    /// `;` or a newline: the next segment runs afterwards regardless.
    Seq,
}

impl Joiner {
    /// The operator as written in a rebuilt command.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pipe => "|",
            Self::And => "&&",
            Self::Or => "||",
            Self::Seq => ";",
        }
    }
}

impl fmt::Display for Joiner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A redirection that cannot read or write anything the command line does not show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `2>&1`.
    StderrToStdout,
    /// `>/dev/null` (also written `1>/dev/null`).
    StdoutToNull,
    /// `2>/dev/null`.
    StderrToNull,
    /// A here-document without expansion feeding stdin; the body is literal text.
    HereDoc {
        /// The exact bytes the command reads on stdin.
        body: String,
    },
}

impl Redirect {
    /// The redirection as re-emitted in a rebuilt command; here-documents are rendered by the
    /// plan because their body follows the command line.
    pub fn as_operator(&self) -> Option<&'static str> {
        match self {
            Self::StderrToStdout => Some("2>&1"),
            Self::StdoutToNull => Some(">/dev/null"),
            Self::StderrToNull => Some("2>/dev/null"),
            Self::HereDoc { .. } => None,
        }
    }
}

/// The `time` keyword in front of a single-command pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeKeyword {
    /// `time cmd`.
    Plain,
    /// `time -p cmd`.
    Posix,
}

/// One simple command of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The segment as the parser printed it back, for reports.
    pub raw: String,
    /// The words after quote removal; only trustworthy when `miss` is `None`.
    pub argv: Vec<String>,
    /// The modelled redirections, in source order (order changes meaning: `2>&1 >/dev/null`).
    pub redirects: Vec<Redirect>,
    /// A `time` keyword that applied to this segment alone.
    pub time_keyword: Option<TimeKeyword>,
    /// The operator to the next segment; `None` on the last one.
    pub joiner: Option<Joiner>,
    /// The first construct in this segment that the model does not cover.
    pub miss: Option<String>,
}

impl Segment {
    /// A segment that stands for a construct the model does not cover.
    pub(crate) fn unmodelled(raw: String, reason: impl Into<String>) -> Self {
        Self {
            raw,
            argv: Vec::new(),
            redirects: Vec::new(),
            time_keyword: None,
            joiner: None,
            miss: Some(reason.into()),
        }
    }

    /// Records a miss unless an earlier one was already recorded.
    pub(crate) fn note_miss(&mut self, reason: impl Into<String>) {
        if self.miss.is_none() {
            self.miss = Some(reason.into());
        }
    }
}

/// A whole command line as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The segments in execution order.
    pub segments: Vec<Segment>,
    /// A miss that concerns the whole line (parse error, empty command).
    pub miss: Option<String>,
}

impl Script {
    /// A script that could not be modelled at all.
    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        Self {
            segments: Vec::new(),
            miss: Some(reason.into()),
        }
    }

    /// The first miss anywhere in the script, whole-line misses first.
    pub fn first_miss(&self) -> Option<&str> {
        self.miss
            .as_deref()
            .or_else(|| self.segments.iter().find_map(|s| s.miss.as_deref()))
    }
}
