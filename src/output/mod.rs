//! Output pipeline pieces: sanitizing, capping, redacting and paging process output, and the
//! escaping every displayed text goes through (escape.rs).

mod bytes;
mod capped;
mod display;
mod escape;
mod lines;
mod live;
mod redact;
mod sanitize;

pub use bytes::human_bytes;
pub use capped::{clamp_max_chars, CappedText, DEFAULT_MAX_CHARS, MAX_MAX_CHARS, MIN_MAX_CHARS};
pub use display::{escape_json_text, escape_terminal};
pub use escape::{display_argv, escape_display, is_deceptive, quote};
pub use lines::{line_window, page, LineCollector, LineCounter, Page, DEFAULT_PAGE_LINES};
pub use live::LiveText;
pub use redact::Redactor;
pub use sanitize::{
    is_format_char, is_stripped_char, Sanitizer, MAX_CONTROL_SEQUENCE_BYTES,
    MAX_STRING_SEQUENCE_BYTES,
};
