//! Terminal input: tmux-style key names, hex bytes, bracketed paste, and tracking of the
//! terminal modes a program switches on.

mod encode;
mod error;
mod hex;
mod modes;
mod paste;

pub use encode::{encode_key, encode_keys};
pub use error::KeyError;
pub use hex::decode_hex;
pub use modes::{cursor_position_report, TermModes};
pub use paste::{paste, PASTE_END, PASTE_START};
