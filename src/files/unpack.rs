//! Unpacking a tar archive that came out of a sandbox (`moat cp SESSION:PATH DIR`) beneath a
//! host directory (docs/security.md, "moat cp").
//!
//! Every entry is hostile. The archive is checked whole before anything is written
//! ([`check_entry`], pure): its names must be relative plain paths (no `/` at the start, no
//! `..`, no `.` in the middle, no control characters, bounded length and depth) and its
//! entries regular files or directories only — symbolic links, hard links, devices and FIFOs
//! are listed as skipped, never made, so nothing later in the archive can be written through
//! them. Then files and directories are made through [`Workspace`], which opens every path
//! beneath the destination with the kernel's help (`openat2` with `RESOLVE_BENEATH`): a
//! symlink already in the destination cannot lead a write out of it either.

use std::io::{Read, Seek, SeekFrom};

use tar::EntryType;

use super::confine::{ConfineError, Workspace};

/// The most one file may hold (it is read into memory before its atomic write).
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// The most all files together may hold.
pub const MAX_TOTAL_BYTES: u64 = 4 << 30;
/// The most entries an archive may have.
pub const MAX_ENTRIES: usize = 100_000;
/// The most bytes of one name, and components in it.
const MAX_NAME_BYTES: usize = 4096;
const MAX_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("unpack `{entry}`: {why}")]
    Refused { entry: String, why: String },
    #[error("unpack the archive: {0}")]
    Bound(String),
    #[error("read the archive")]
    Read(#[source] std::io::Error),
    #[error(transparent)]
    Confine(#[from] ConfineError),
}

/// What one entry is, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    File(String),
    Dir(String),
    /// Not made: a link, a device, a FIFO (the kind is named).
    Skipped(String, &'static str),
}

/// Judges one entry by its raw name and type (see the module docs).
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
        _ => Checked::Skipped(path, "an entry of another kind"),
    })
}

/// What [`unpack`] made.
#[derive(Debug, Default)]
pub struct Unpacked {
    pub files: usize,
    pub dirs: usize,
    pub bytes: u64,
    /// Entries not made, with why (links, devices).
    pub skipped: Vec<String>,
}

/// Checks every entry of `archive`, then makes them beneath `dest`.
pub fn unpack<R: Read + Seek>(mut archive: R, dest: &Workspace) -> Result<Unpacked, UnpackError> {
    let mut plan = Vec::new();
    let mut total = 0u64;
    {
        let mut a = tar::Archive::new(&mut archive);
        for entry in a.entries().map_err(UnpackError::Read)? {
            let entry = entry.map_err(UnpackError::Read)?;
            let raw = entry.path_bytes().into_owned();
            let shown = crate::policy::escape_display(&String::from_utf8_lossy(&raw));
            let checked = check_entry(&raw, entry.header().entry_type())
                .map_err(|why| UnpackError::Refused { entry: shown, why })?;
            let size = entry.size();
            if matches!(checked, Checked::File(_)) {
                if size > MAX_FILE_BYTES {
                    return Err(UnpackError::Bound(format!(
                        "a file of {size} bytes is over the {MAX_FILE_BYTES} one copy may hold per file"
                    )));
                }
                total += size;
            }
            if total > MAX_TOTAL_BYTES || plan.len() >= MAX_ENTRIES {
                return Err(UnpackError::Bound(format!(
                    "more than {MAX_TOTAL_BYTES} bytes or {MAX_ENTRIES} entries"
                )));
            }
            plan.push(checked);
        }
    }
    archive
        .seek(SeekFrom::Start(0))
        .map_err(UnpackError::Read)?;
    let mut done = Unpacked::default();
    let mut a = tar::Archive::new(archive);
    for (entry, checked) in a.entries().map_err(UnpackError::Read)?.zip(plan) {
        let mut entry = entry.map_err(UnpackError::Read)?;
        match checked {
            Checked::Dir(path) => {
                dest.make_dir(&path)?;
                done.dirs += 1;
            }
            Checked::File(path) => {
                let mut data = Vec::with_capacity(entry.size() as usize);
                (&mut entry)
                    .take(MAX_FILE_BYTES)
                    .read_to_end(&mut data)
                    .map_err(UnpackError::Read)?;
                dest.entry(&path, true)?.write(&data, dest.owner())?;
                done.files += 1;
                done.bytes += data.len() as u64;
            }
            Checked::Skipped(path, _) if path == "." => {}
            Checked::Skipped(path, why) => done
                .skipped
                .push(format!("{} ({why})", crate::policy::escape_display(&path))),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_judged_by_name_and_kind() {
        use EntryType::*;
        let rows: &[(&[u8], EntryType, Result<Checked, &str>)] = &[
            (b"a.txt", Regular, Ok(Checked::File("a.txt".into()))),
            (
                b"./dir/b.txt",
                Regular,
                Ok(Checked::File("dir/b.txt".into())),
            ),
            (b"dir/", Directory, Ok(Checked::Dir("dir".into()))),
            (
                b"./",
                Directory,
                Ok(Checked::Skipped(".".into(), "the archive's root")),
            ),
            (b"/etc/passwd", Regular, Err("absolute")),
            (b"../escape", Regular, Err("`..`")),
            (b"dir/../../escape", Regular, Err("`..`")),
            (b"dir/./x", Regular, Err("`.` component")),
            (b"dir//x", Regular, Err("empty component")),
            (b"bad\x1b[2Jname", Regular, Err("control")),
            (b"bad\xffname", Regular, Err("UTF-8")),
            (
                b"link",
                Symlink,
                Ok(Checked::Skipped("link".into(), "a symbolic link")),
            ),
            (
                b"hard",
                Link,
                Ok(Checked::Skipped("hard".into(), "a hard link")),
            ),
            (b"dev", Char, Ok(Checked::Skipped("dev".into(), "a device"))),
            (b"pipe", Fifo, Ok(Checked::Skipped("pipe".into(), "a FIFO"))),
        ];
        for (name, kind, want) in rows {
            let got = check_entry(name, *kind);
            match want {
                Ok(c) => assert_eq!(got.as_ref(), Ok(c), "{name:?}"),
                Err(needle) => assert!(got.unwrap_err().contains(needle), "{name:?}"),
            }
        }
        let deep = "d/".repeat(70) + "f";
        assert!(check_entry(deep.as_bytes(), Regular).is_err());
    }

    /// A raw tar header for `name` of `kind` (the tar crate's builder refuses hostile names,
    /// which is exactly what a sandbox would send).
    fn raw_entry(out: &mut Vec<u8>, name: &[u8], kind: EntryType, link: &[u8], data: &[u8]) {
        let mut h = tar::Header::new_old();
        let field = &mut h.as_old_mut().name;
        field[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if !link.is_empty() {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        }
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }

    fn finish(out: &mut Vec<u8>) {
        out.extend_from_slice(&[0u8; 1024]);
    }

    #[test]
    fn a_hostile_archive_writes_nothing_outside_and_nothing_at_all_when_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        // A symlink to outside, then a file "through" it: the link is never made, so the file
        // lands in a real directory of that name inside.
        let mut tar = Vec::new();
        raw_entry(&mut tar, b"ok.txt", EntryType::Regular, b"", b"fine\n");
        raw_entry(
            &mut tar,
            b"esc",
            EntryType::Symlink,
            outside.to_str().unwrap().as_bytes(),
            b"",
        );
        raw_entry(&mut tar, b"esc/pwned", EntryType::Regular, b"", b"x");
        finish(&mut tar);
        let ws = Workspace::open(&dest, (0, 0)).unwrap();
        let done = unpack(std::io::Cursor::new(tar), &ws).unwrap();
        assert_eq!(done.files, 2);
        assert_eq!(done.skipped, ["esc (a symbolic link)"]);
        assert_eq!(
            std::fs::read_to_string(dest.join("ok.txt")).unwrap(),
            "fine\n"
        );
        assert!(dest.join("esc").is_dir() && !dest.join("esc").is_symlink());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // A symlink already in the destination does not lead a write out either.
        let dest2 = dir.path().join("dest2");
        std::fs::create_dir(&dest2).unwrap();
        std::os::unix::fs::symlink(&outside, dest2.join("planted")).unwrap();
        let mut tar = Vec::new();
        raw_entry(&mut tar, b"planted/pwned", EntryType::Regular, b"", b"x");
        finish(&mut tar);
        let ws = Workspace::open(&dest2, (0, 0)).unwrap();
        assert!(unpack(std::io::Cursor::new(tar), &ws).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // `..` and absolute names refuse the whole archive before anything is written.
        for bad in [&b"../pwned"[..], b"/tmp/pwned-by-tar", b"a/../../pwned"] {
            let dest3 = tempfile::tempdir().unwrap();
            let mut tar = Vec::new();
            raw_entry(&mut tar, b"first.txt", EntryType::Regular, b"", b"x");
            raw_entry(&mut tar, bad, EntryType::Regular, b"", b"x");
            finish(&mut tar);
            let ws = Workspace::open(dest3.path(), (0, 0)).unwrap();
            let err = unpack(std::io::Cursor::new(tar), &ws).unwrap_err();
            assert!(matches!(err, UnpackError::Refused { .. }), "{err}");
            assert_eq!(std::fs::read_dir(dest3.path()).unwrap().count(), 0);
        }
        assert!(!Path::new("/tmp/pwned-by-tar").exists());
    }

    use std::path::Path;
}
