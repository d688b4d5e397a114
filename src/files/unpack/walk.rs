//! The one parser both passes of [`super::unpack`] run: it walks a tar archive header by
//! header and judges every entry before anyone sees it (docs/security.md, "moat cp").
//!
//! The tar crate is used in raw mode, so its own handling of extension entries — which
//! reads a GNU long name or a pax header whole into memory, whatever size the header claims —
//! never runs: each extension entry is bounded here first (a long name or link at most 4097
//! bytes, a pax header at most 64 KiB), then read. A pax header may rename the next entry
//! (`path`); one that would change where the next header starts (`size`) or describes a sparse
//! file is refused, so the archive has one reading only, this one.

use std::io::Read;

use tar::{EntryType, PaxExtensions};

use super::{Bounds, UnpackError};

/// The most bytes of one name, and components in it.
const MAX_NAME_BYTES: usize = 4096;
const MAX_DEPTH: usize = 64;
/// The most a GNU long name or long link entry may hold: a name and its NUL.
const MAX_LONG_NAME: u64 = MAX_NAME_BYTES as u64 + 1;
/// The most a pax header may hold: a name and a few records fit many times over.
const MAX_PAX_BYTES: u64 = 64 << 10;

/// What one entry is, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    File(String),
    Dir(String),
    /// Not made: a link, a device, a FIFO (the kind is named).
    Skipped(String, &'static str),
}

/// Judges one entry by its raw name and type: a relative plain path (no `/` at the start, no
/// `..`, no `.` or empty component, no control characters, bounded length and depth), and a
/// regular file or directory; anything else is listed as skipped.
pub fn check_entry(name: &[u8], kind: EntryType) -> Result<Checked, String> {
    let text = std::str::from_utf8(name).map_err(|_| "the name is not UTF-8".to_string())?;
    if text.len() > MAX_NAME_BYTES {
        return Err("the name is longer than 4096 bytes".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the name holds control characters".into());
    }
    if text.starts_with('/') {
        return Err("the name is absolute".into());
    }
    let trimmed = text.strip_prefix("./").unwrap_or(text);
    let trimmed = trimmed.trim_end_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        // The archive's own top (`./`): nothing to make.
        return Ok(Checked::Skipped(".".into(), "the archive's root"));
    }
    let parts: Vec<&str> = trimmed.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return Err("the name is deeper than 64 directories".into());
    }
    for p in &parts {
        match *p {
            "" => return Err("the name holds an empty component (`//`)".into()),
            "." => return Err("the name holds a `.` component".into()),
            ".." => return Err("the name holds `..`".into()),
            _ => {}
        }
    }
    let path = parts.join("/");
    Ok(match kind {
        EntryType::Regular | EntryType::Continuous => Checked::File(path),
        EntryType::Directory => Checked::Dir(path),
        EntryType::Symlink => Checked::Skipped(path, "a symbolic link"),
        EntryType::Link => Checked::Skipped(path, "a hard link"),
        EntryType::Char | EntryType::Block => Checked::Skipped(path, "a device"),
        EntryType::Fifo => Checked::Skipped(path, "a FIFO"),
        // Its data is laid out after extra headers the size does not count: refused rather
        // than read another way than `tar` would (moat cp never asks for `--sparse`).
        EntryType::GNUSparse => return Err("it is a GNU sparse file".into()),
        _ => Checked::Skipped(path, "an entry of another kind"),
    })
}

/// Extension entries seen since the last real entry: they describe the next one.
#[derive(Default)]
struct Pending {
    /// A GNU long name (`L`).
    long_name: Option<Vec<u8>>,
    /// A pax `path` record (`x`), which wins over a long name.
    pax_path: Option<Vec<u8>>,
    /// Whether any extension entry is waiting for its entry.
    any: bool,
}

/// Walks `archive` to its end-of-archive block and hands each entry, judged, to `each` with
/// its data. Stops at the first bad entry or bound: every entry's size (whatever its kind) is
/// at most `bounds.file_bytes`, all sizes together at most `bounds.total_bytes`, and there are
/// at most `bounds.entries` entries (and as many extension entries again, twice).
pub(super) fn walk<R: Read>(
    archive: R,
    bounds: &Bounds,
    mut each: impl FnMut(Checked, &mut dyn Read) -> Result<(), UnpackError>,
) -> Result<(), UnpackError> {
    let mut archive = tar::Archive::new(archive);
    let mut pending = Pending::default();
    let (mut declared, mut entries, mut extensions) = (0u64, 0usize, 0usize);
    for entry in archive.entries().map_err(UnpackError::Read)?.raw(true) {
        let mut entry = entry.map_err(UnpackError::Read)?;
        let kind = entry.header().entry_type();
        let size = entry.size();
        if size > bounds.file_bytes {
            return Err(UnpackError::Bound(format!(
                "an entry of {size} bytes is over the {} one copy may hold per file",
                bounds.file_bytes
            )));
        }
        declared += size;
        if declared > bounds.total_bytes {
            return Err(UnpackError::Bound(format!(
                "the entries hold more than the {} bytes one copy may hold in all",
                bounds.total_bytes
            )));
        }
        if kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions()
        {
            extensions += 1;
            if extensions > bounds.entries.saturating_mul(2) + 2 {
                return Err(UnpackError::Bound(format!(
                    "more extension headers than {} entries can need",
                    bounds.entries
                )));
            }
            extension(&mut entry, kind, size, &mut pending)?;
            continue;
        }
        entries += 1;
        if entries > bounds.entries {
            return Err(UnpackError::Bound(format!(
                "more than {} entries",
                bounds.entries
            )));
        }
        let header_name = entry.path_bytes().into_owned();
        let raw = pending
            .pax_path
            .take()
            .or(pending.long_name.take())
            .unwrap_or(header_name);
        pending.any = false;
        let shown = crate::output::escape_display(&String::from_utf8_lossy(&raw));
        let checked =
            check_entry(&raw, kind).map_err(|why| UnpackError::Refused { entry: shown, why })?;
        each(checked, &mut entry)?;
    }
    if pending.any {
        return Err(UnpackError::Refused {
            entry: "(the end)".into(),
            why: "an extension header has no entry after it".into(),
        });
    }
    Ok(())
}

/// Reads one extension entry, bounded before it is read, into `pending`.
fn extension<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    kind: EntryType,
    size: u64,
    pending: &mut Pending,
) -> Result<(), UnpackError> {
    let (limit, what) = if kind.is_gnu_longname() || kind.is_gnu_longlink() {
        (MAX_LONG_NAME, "a GNU long name")
    } else {
        (MAX_PAX_BYTES, "a pax header")
    };
    let refused = |why: String| UnpackError::Refused {
        entry: format!("({what})"),
        why,
    };
    if size > limit {
        return Err(refused(format!("it holds {size} bytes, over {limit}")));
    }
    let mut data = Vec::with_capacity(size as usize);
    entry
        .take(limit)
        .read_to_end(&mut data)
        .map_err(UnpackError::Read)?;
    pending.any = true;
    if kind.is_gnu_longname() {
        if pending.long_name.is_some() {
            return Err(refused("two long names for one entry".into()));
        }
        while data.last() == Some(&0) {
            data.pop();
        }
        pending.long_name = Some(data);
    } else if kind.is_pax_local_extensions() {
        for record in PaxExtensions::new(&data) {
            let record = record.map_err(|_| refused("a record is malformed".into()))?;
            let key = record
                .key()
                .map_err(|_| refused("a key is not UTF-8".into()))?;
            match key {
                "path" => pending.pax_path = Some(record.value_bytes().to_vec()),
                // The next header's place would then differ from what the header says.
                "size" => return Err(refused("it sets an entry's size".into())),
                k if k.starts_with("GNU.sparse.") => {
                    return Err(refused("it describes a sparse file".into()))
                }
                _ => {}
            }
        }
    }
    // A long link names a link's target (links are never made); a global pax header holds
    // defaults moat does not use.
    Ok(())
}
