//! The file tools' shapes (docs/mcp.md, "File tools"). Their refusals under `security =
//! deny` are [`super::Denied`], their errors [`super::Bare`]. Every path is the one the
//! agent gave, shown escaped.

use serde::{Deserialize, Serialize};

use crate::contract::status::Status;

/// [`Details::FileLines`](super::Details::FileLines): `read_file` by lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLines {
    /// Lines shown.
    pub lines: u64,
    /// Whether the file goes on after them.
    pub more: bool,
    /// The first line shown (1-based): the one to start from again.
    pub offset: u64,
    /// The file read.
    pub path: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Always `completed`.
    pub status: Status,
}

/// [`Details::FileBytes`](super::Details::FileBytes): `read_file` by bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBytes {
    /// Where the range started (0-based).
    pub byte_offset: u64,
    /// Bytes read from there.
    pub bytes: u64,
    /// Whether the file goes on after them.
    pub more: bool,
    /// The file read.
    pub path: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Always `completed`.
    pub status: Status,
}

/// [`Details::BinaryFile`](super::Details::BinaryFile): `read_file` of a file whose start is
/// not text; nothing of it is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinaryFile {
    /// Always true: what tells this answer from a read.
    pub binary: bool,
    /// The file.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Always `completed`.
    pub status: Status,
}

/// [`Details::FileWritten`](super::Details::FileWritten): `write_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileWritten {
    /// Bytes written: the whole file now.
    pub bytes: u64,
    /// Whether the file was new (else it was replaced).
    pub created: bool,
    /// The file written.
    pub path: String,
    /// Always `completed`.
    pub status: Status,
}

/// [`Details::DirListing`](super::Details::DirListing): `list_dir`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirListing {
    /// The entries shown, sorted by name.
    pub entries: Vec<DirEntry>,
    /// Whether entries were left out (by the limit or the scan bound).
    pub more: bool,
    /// The directory listed.
    pub path: String,
    /// Always `completed`.
    pub status: Status,
    /// Entries in the directory, counted up to the scan bound.
    pub total: u64,
}

/// One entry of a [`DirListing`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirEntry {
    /// The name, escaped (control, bidi and invisible characters shown as `\u{…}`): the
    /// sandbox chooses it.
    pub name: String,
    /// Bytes, for files (and the link text's length for symlinks); 0 for directories.
    pub size: u64,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: EntryKind,
}

/// What a directory entry is, as `details.entries[].type` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else, or an entry gone before it could be looked at.
    Other,
}

impl EntryKind {
    /// The word as the wire (and the listing's text) writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// [`Details::Patched`](super::Details::Patched): `apply_patch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patched {
    /// One line per file changed, `A`, `M` or `D` and its path, as the text lists them.
    pub files: Vec<String>,
    /// Always `completed`.
    pub status: Status,
}
