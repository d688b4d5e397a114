//! Unpacking a tar archive that came out of a sandbox (`moat cp SESSION:PATH DIR`) beneath a
//! host directory (docs/security.md, "moat cp").
//!
//! Every entry is hostile, and so is the file the archive comes in: the sandbox wrote it and
//! can write it again at any moment. So the archive is read once, front to back, and every
//! byte read is kept in a file only moat holds ([`spool`]); the first pass judges every entry
//! on the way ([`walk`]) and refuses the whole archive on a bad name or a bound before anything
//! is written; the second pass reads moat's copy, judges every entry again, and must find the
//! same entries. Links, devices and FIFOs are listed as skipped, never made, so nothing later
//! in the archive can be written through them. Files and directories are made through
//! [`Workspace`], which opens every path beneath the destination with the kernel's help
//! (`openat2` with `RESOLVE_BENEATH`): a symlink already in the destination cannot lead a
//! write out of it either. The bounds hold on the bytes written, too: the second pass counts
//! what it writes, and over a bound it stops and removes what this copy made.

mod spool;
mod walk;

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};

use nix::unistd::{unlinkat, UnlinkatFlags};

use super::confine::{ConfineError, Workspace};
use spool::Spool;
pub use walk::{check_entry, Checked};

/// The most one file may hold (it is read into memory before its atomic write).
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// The most all files together may hold.
pub const MAX_TOTAL_BYTES: u64 = 4 << 30;
/// The most entries an archive may have.
pub const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("unpack `{entry}`: {why}")]
    Refused { entry: String, why: String },
    #[error("unpack the archive: {0}")]
    Bound(String),
    #[error("read the archive")]
    Read(#[source] std::io::Error),
    #[error("keep moat's copy of the archive")]
    Spool(#[source] std::io::Error),
    #[error("unpack the archive: it read differently the second time ({0}); nothing was kept")]
    Changed(String),
    #[error(transparent)]
    Confine(#[from] ConfineError),
}

/// The bounds one copy is held to.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The most one entry may hold: a file is read into memory before it is written.
    pub file_bytes: u64,
    /// The most all entries together may hold, and all files written.
    pub total_bytes: u64,
    /// The most entries (extension headers aside).
    pub entries: usize,
}

impl Bounds {
    pub const DEFAULT: Bounds = Bounds {
        file_bytes: MAX_FILE_BYTES,
        total_bytes: MAX_TOTAL_BYTES,
        entries: MAX_ENTRIES,
    };

    /// The most bytes of the sandbox's file ever read: every entry's data within the bounds,
    /// plus a header and padding for each entry and extension entry, plus the end.
    fn archive_bytes(&self) -> u64 {
        let headers = (self.entries as u64).saturating_mul(3).saturating_add(4);
        self.total_bytes
            .saturating_add(headers.saturating_mul(1024))
            .saturating_add(64 << 10)
    }
}

/// What [`unpack`] made.
#[derive(Debug, Default)]
pub struct Unpacked {
    pub files: usize,
    pub dirs: usize,
    /// Bytes written, counted as they were.
    pub bytes: u64,
    /// Entries not made, with why (links, devices).
    pub skipped: Vec<String>,
}

/// Reads `source` once into `spool` (an empty file only moat holds, open for reading and
/// writing), checking every entry on the way, then makes the entries beneath `dest` from the
/// spool. `source` is never read again after the check, and never sought.
pub fn unpack<R: Read>(source: R, spool: File, dest: &Workspace) -> Result<Unpacked, UnpackError> {
    unpack_within(source, spool, dest, &Bounds::DEFAULT)
}

/// [`unpack`] with other bounds (tests use small ones).
pub fn unpack_within<R: Read>(
    source: R,
    spool: File,
    dest: &Workspace,
    bounds: &Bounds,
) -> Result<Unpacked, UnpackError> {
    let mut reader = Spool::new(source, spool, bounds.archive_bytes());
    let mut plan = Vec::new();
    let checked = walk::walk(&mut reader, bounds, |checked, _| {
        plan.push(checked);
        Ok(())
    });
    if let Some(e) = reader.failure() {
        return Err(UnpackError::Spool(e));
    }
    checked?;
    let copy = reader.finish().map_err(UnpackError::Spool)?;
    make(copy, &plan, dest, bounds)
}

/// The second pass: makes the entries of moat's copy, which must be the `plan` the first pass
/// judged; on any failure, what it made is removed again.
fn make(
    copy: File,
    plan: &[Checked],
    dest: &Workspace,
    bounds: &Bounds,
) -> Result<Unpacked, UnpackError> {
    let mut made = Made::default();
    let result = make_all(copy, plan, dest, bounds, &mut made);
    if result.is_err() {
        made.undo(dest);
    }
    result
}

fn make_all(
    copy: File,
    plan: &[Checked],
    dest: &Workspace,
    bounds: &Bounds,
    made: &mut Made,
) -> Result<Unpacked, UnpackError> {
    let mut done = Unpacked::default();
    let mut at = 0;
    walk::walk(
        BufReader::with_capacity(1 << 16, copy),
        bounds,
        |checked, data| {
            if plan.get(at) != Some(&checked) {
                return Err(UnpackError::Changed(format!(
                    "entry {} is not the one checked",
                    at + 1
                )));
            }
            at += 1;
            match checked {
                Checked::Dir(path) => {
                    made.note_dirs(dest, &path, true);
                    dest.make_dir(&path)?;
                    done.dirs += 1;
                }
                Checked::File(path) => {
                    let mut bytes = Vec::new();
                    data.take(bounds.file_bytes + 1)
                        .read_to_end(&mut bytes)
                        .map_err(UnpackError::Read)?;
                    let n = bytes.len() as u64;
                    if n > bounds.file_bytes || done.bytes + n > bounds.total_bytes {
                        return Err(UnpackError::Bound(format!(
                            "writing {path} would pass {} bytes for the file or {} in all",
                            bounds.file_bytes, bounds.total_bytes
                        )));
                    }
                    made.note_dirs(dest, &path, false);
                    dest.entry(&path, true)?.write(&bytes, dest.owner())?;
                    made.files.push(path);
                    done.files += 1;
                    done.bytes += n;
                }
                Checked::Skipped(path, _) if path == "." => {}
                Checked::Skipped(path, why) => done
                    .skipped
                    .push(format!("{} ({why})", crate::output::escape_display(&path))),
            }
            Ok(())
        },
    )?;
    if at != plan.len() {
        return Err(UnpackError::Changed(format!(
            "{at} entries, not the {} checked",
            plan.len()
        )));
    }
    Ok(done)
}

/// What the second pass made, so a failure can take it back.
#[derive(Default)]
struct Made {
    /// Files written, in order.
    files: Vec<String>,
    /// Directories that did not exist before this copy, parents first.
    dirs: Vec<String>,
    /// Directories known to exist (before, or made by this copy): looked up once each.
    known: HashSet<String>,
}

impl Made {
    /// Notes which directories making `path` (a file's parents; with `itself`, the directory
    /// `path` too) creates.
    fn note_dirs(&mut self, dest: &Workspace, path: &str, itself: bool) {
        let parts: Vec<&str> = path.split('/').collect();
        let upto = if itself { parts.len() } else { parts.len() - 1 };
        for i in 1..=upto {
            let dir = parts[..i].join("/");
            if self.known.contains(&dir) {
                continue;
            }
            if matches!(dest.open_dir(&dir), Err(ConfineError::Missing { .. })) {
                self.dirs.push(dir.clone());
            }
            self.known.insert(dir);
        }
    }

    /// Removes the files written and the directories made, deepest first; what cannot be
    /// removed (already gone, not empty) is left.
    fn undo(&self, dest: &Workspace) {
        for path in self.files.iter().rev() {
            if let Ok(entry) = dest.entry(path, false) {
                let _ = entry.remove();
            }
        }
        for path in self.dirs.iter().rev() {
            let (parent, name) = path.rsplit_once('/').unwrap_or((".", path));
            if let Ok(fd) = dest.open_dir(parent) {
                let _ = unlinkat(&fd, name, UnlinkatFlags::RemoveDir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar::EntryType;

    /// An empty file only this test holds, as `moat cp` passes one.
    fn spool() -> File {
        tempfile::tempfile().unwrap()
    }

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
        let done = unpack(std::io::Cursor::new(tar), spool(), &ws).unwrap();
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
        assert!(unpack(std::io::Cursor::new(tar), spool(), &ws).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // `..` and absolute names refuse the whole archive before anything is written.
        for bad in [&b"../pwned"[..], b"/tmp/pwned-by-tar", b"a/../../pwned"] {
            let dest3 = tempfile::tempdir().unwrap();
            let mut tar = Vec::new();
            raw_entry(&mut tar, b"first.txt", EntryType::Regular, b"", b"x");
            raw_entry(&mut tar, bad, EntryType::Regular, b"", b"x");
            finish(&mut tar);
            let ws = Workspace::open(dest3.path(), (0, 0)).unwrap();
            let err = unpack(std::io::Cursor::new(tar), spool(), &ws).unwrap_err();
            assert!(matches!(err, UnpackError::Refused { .. }), "{err}");
            assert_eq!(std::fs::read_dir(dest3.path()).unwrap().count(), 0);
        }
        assert!(!Path::new("/tmp/pwned-by-tar").exists());
    }

    use std::path::Path;

    /// A raw header block for `name` of `kind` claiming `size` bytes (no data).
    fn header(name: &[u8], kind: EntryType, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    /// The sandbox's file while `moat cp` reads it: after moat's first read, the script in the
    /// sandbox rewrites the first header so it claims the bytes up to `tail_at` for itself,
    /// and writes new headers there whose data is a hole (docs/security.md, "moat cp").
    struct Rewritten {
        file: File,
        path: std::path::PathBuf,
        tail_at: u64,
        tail: Vec<u8>,
        first: Vec<u8>,
        reads: usize,
    }

    impl Read for Rewritten {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            // Small reads, so the rewrite lands while most of the archive is still unread.
            let cap = buf.len().min(512);
            let n = self.file.read(&mut buf[..cap])?;
            self.reads += 1;
            if self.reads == 1 {
                use std::os::unix::fs::FileExt;
                let w = std::fs::OpenOptions::new().write(true).open(&self.path)?;
                w.write_all_at(&self.tail, self.tail_at)?;
                w.write_all_at(&self.first, 0)?;
            }
            Ok(n)
        }
    }

    /// What the unpacker before this one wrote from `file`: the entries its first pass counted
    /// on the bytes it read then (`checked`), written from a second reading of the file as it
    /// is now, each up to the per-file bound.
    fn read_again_as_before(file: &std::path::Path, checked: usize, per_file: u64) -> u64 {
        let mut a = tar::Archive::new(File::open(file).unwrap());
        let mut written = 0;
        for entry in a.entries().unwrap().take(checked) {
            let entry = entry.unwrap();
            if entry.header().entry_type() == EntryType::Regular {
                written += entry.size().min(per_file);
            }
        }
        written
    }

    #[test]
    fn a_rewrite_after_the_first_read_changes_nothing_that_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp.tar");
        // What `tar` in the sandbox wrote: a directory, a small file, an empty one.
        let mut original = Vec::new();
        raw_entry(&mut original, b"d/", EntryType::Directory, b"", b"");
        raw_entry(
            &mut original,
            b"d/a",
            EntryType::Regular,
            b"",
            &[b'x'; 1000],
        );
        raw_entry(&mut original, b"d/b", EntryType::Regular, b"", b"");
        finish(&mut original);
        std::fs::write(&path, &original).unwrap();
        // The payload: two 300 KiB files at 1 MiB, and a first header that reaches them.
        let tail_at = 1 << 20;
        let mut tail = header(b"d/g1", EntryType::Regular, 300 << 10);
        tail.resize(512 + (300 << 10), 0);
        tail.extend(header(b"d/g2", EntryType::Regular, 300 << 10));
        tail.resize(2 * (512 + (300 << 10)), 0);
        tail.extend_from_slice(&[0u8; 1024]);
        let first = header(b"d/", EntryType::Directory, tail_at - 512);
        let bounds = Bounds {
            file_bytes: 512 << 10,
            total_bytes: 700 << 10,
            entries: 100,
        };
        let source = Rewritten {
            file: File::open(&path).unwrap(),
            path: path.clone(),
            tail_at,
            tail,
            first,
            reads: 0,
        };
        let dest = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dest.path(), (0, 0)).unwrap();
        let done = unpack_within(source, spool(), &ws, &bounds).unwrap();
        // Control: the file now reads as the payload says, and a second reading of it, as the
        // unpacker before this one did, writes 600 KiB where the check counted 1000 bytes.
        assert_eq!(read_again_as_before(&path, 3, bounds.file_bytes), 600 << 10);
        // What was made is what was read once, and checked.
        assert_eq!((done.dirs, done.files, done.bytes), (1, 2, 1000));
        assert_eq!(
            std::fs::read(dest.path().join("d/a")).unwrap(),
            [b'x'; 1000]
        );
        assert_eq!(std::fs::read(dest.path().join("d/b")).unwrap().len(), 0);
        assert!(!dest.path().join("d/g1").exists());
    }

    #[test]
    fn the_bytes_written_are_counted_and_a_failure_takes_back_what_was_made() {
        let bounds = Bounds {
            file_bytes: 64,
            total_bytes: 32,
            entries: 10,
        };
        let archive = |size: usize| {
            let mut tar = Vec::new();
            raw_entry(&mut tar, b"new/", EntryType::Directory, b"", b"");
            raw_entry(
                &mut tar,
                b"new/deep/one",
                EntryType::Regular,
                b"",
                &vec![b'1'; size],
            );
            raw_entry(&mut tar, b"two", EntryType::Regular, b"", &vec![b'2'; size]);
            finish(&mut tar);
            tar
        };
        let mut plan = Vec::new();
        walk::walk(&archive(10)[..], &bounds, |c, _| {
            plan.push(c);
            Ok(())
        })
        .unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::fs::write(dest.path().join("before"), "kept").unwrap();
        let ws = Workspace::open(dest.path(), (0, 0)).unwrap();
        // A copy that is not what was checked (it cannot be, but the writer does not trust
        // that): the second file passes the total while it is written.
        let mut copy = spool();
        std::io::Write::write_all(&mut copy, &archive(20)).unwrap();
        std::io::Seek::rewind(&mut copy).unwrap();
        let err = make(copy, &plan, &ws, &bounds).unwrap_err();
        assert!(matches!(err, UnpackError::Bound(_)), "{err}");
        let left: Vec<_> = std::fs::read_dir(dest.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            ["before"],
            "what this copy made is gone, nothing else"
        );
        // Entries other than the ones checked are refused the same way.
        let mut other = Vec::new();
        raw_entry(&mut other, b"new/", EntryType::Directory, b"", b"");
        raw_entry(&mut other, b"elsewhere", EntryType::Regular, b"", b"x");
        finish(&mut other);
        let mut copy = spool();
        std::io::Write::write_all(&mut copy, &other).unwrap();
        std::io::Seek::rewind(&mut copy).unwrap();
        let err = make(copy, &plan, &ws, &bounds).unwrap_err();
        assert!(matches!(err, UnpackError::Changed(_)), "{err}");
        assert!(!dest.path().join("new").exists());
    }

    /// Counts the bytes taken from a source.
    struct Counted<R>(R, std::rc::Rc<std::cell::Cell<u64>>);

    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n as u64);
            Ok(n)
        }
    }

    #[test]
    fn extension_entries_are_bounded_before_they_are_read() {
        let dest = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dest.path(), (0, 0)).unwrap();
        let run = |tar: Vec<u8>| {
            let read = std::rc::Rc::new(std::cell::Cell::new(0));
            let r = unpack(
                Counted(std::io::Cursor::new(tar), read.clone()),
                spool(),
                &ws,
            );
            (r, read.get())
        };
        // A long name that claims 100 MiB (sparse, free for the sandbox): refused from its
        // header, with almost nothing read.
        let mut tar = header(b"././@LongLink", EntryType::GNULongName, 100 << 20);
        tar.resize(tar.len() + (1 << 20), b'a');
        let (r, read) = run(tar);
        assert!(r.unwrap_err().to_string().contains("over 4097"));
        assert!(read <= 1 << 16, "{read} bytes read");
        // A header that claims a terabyte: refused from its header.
        let (r, read) = run(header(b"big", EntryType::Regular, 1 << 40));
        assert!(matches!(r, Err(UnpackError::Bound(_))));
        assert!(read <= 1 << 16, "{read} bytes read");
        // A pax header that sets a size, or describes a sparse file, is refused.
        for record in ["size=10", "GNU.sparse.major=1"] {
            let line = format!("{} {record}\n", record.len() + 4);
            let mut tar = Vec::new();
            raw_entry(&mut tar, b"pax", EntryType::XHeader, b"", line.as_bytes());
            raw_entry(&mut tar, b"f", EntryType::Regular, b"", b"x");
            finish(&mut tar);
            assert!(
                matches!(run(tar).0, Err(UnpackError::Refused { .. })),
                "{record}"
            );
        }
        // Long names as GNU tar and pax write them are names like any other.
        let long = format!("{}/file", "n".repeat(150));
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o644);
        b.append_data(&mut h, &long, &b"hi"[..]).unwrap();
        let tar = b.into_inner().unwrap();
        let (r, _) = run(tar);
        assert_eq!(r.unwrap().files, 1);
        assert_eq!(std::fs::read(dest.path().join(&long)).unwrap(), b"hi");
        let record = "path=pax/../../escape";
        let line = format!("{} {record}\n", record.len() + 4);
        let mut tar = Vec::new();
        raw_entry(&mut tar, b"pax", EntryType::XHeader, b"", line.as_bytes());
        raw_entry(&mut tar, b"innocent", EntryType::Regular, b"", b"x");
        finish(&mut tar);
        let err = run(tar).0.unwrap_err().to_string();
        assert!(
            err.contains("`..`"),
            "the pax name is the one judged: {err}"
        );
        // An extension with no entry after it.
        let mut tar = Vec::new();
        raw_entry(
            &mut tar,
            b"././@LongLink",
            EntryType::GNULongName,
            b"",
            b"name\0",
        );
        finish(&mut tar);
        assert!(run(tar)
            .0
            .unwrap_err()
            .to_string()
            .contains("no entry after it"));
    }
}
