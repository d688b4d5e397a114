//! Writing a file where it stands, as E2B's daemon writes an upload (docs/e2b.md,
//! "Watching"): created (or truncated) under its own name, given to its owner, then written —
//! so a watcher sees `create` (or `write`), `chmod`, `write` for that name, not a temporary
//! name renamed over it. Only a file that is new or already the writer's is written in place;
//! another's is replaced as before (`Entry::write_from`), so moat, writing as root, never
//! writes into a file the acting user could not; a link or anything but a regular file is
//! refused, as there.

use std::fs::File;
use std::io::{self, Read};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode};
use nix::unistd::{fchown, ftruncate, Gid, Uid};

use super::{io_err, kind, ConfineError, Entry};

impl Entry {
    /// Writes what `src` yields (at most `max` bytes) into the file here in place, owned by
    /// `owner`, then sets `attrs`, after clearing the attributes named `attrs_prefix…` a file
    /// written before had; see the module docs. Returns the bytes written.
    pub fn write_in_place_from(
        &self,
        src: &mut dyn Read,
        max: u64,
        owner: Option<(u32, u32)>,
        attrs_prefix: &str,
        attrs: &[(String, Vec<u8>)],
    ) -> Result<u64, ConfineError> {
        let base = OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let (fd, new) = match openat(
            &self.parent,
            self.name.as_os_str(),
            base | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => (fd, true),
            Err(Errno::EEXIST) => {
                // Something is there: written in place only when it is a regular file of the
                // writer's; another's is replaced; a link or a FIFO is refused (`regular`).
                let writers = match self.regular()? {
                    Some(st) => owner.is_none_or(|(uid, _)| uid == 0 || st.st_uid == uid),
                    None => false,
                };
                if !writers {
                    return self.write_from(src, max, owner, attrs);
                }
                match openat(&self.parent, self.name.as_os_str(), base, Mode::empty()) {
                    Ok(fd) => (fd, false),
                    Err(Errno::ENOENT | Errno::ELOOP | Errno::ENXIO) => {
                        return self.write_from(src, max, owner, attrs)
                    }
                    Err(e) => return Err(io_err("open", &self.shown, e)),
                }
            }
            Err(e) => return Err(io_err("create", &self.shown, e)),
        };
        // What was opened is what is written: a regular file, whatever raced the checks.
        let st = fstat(&fd).map_err(|e| io_err("inspect", &self.shown, e))?;
        if kind(&st) != nix::sys::stat::SFlag::S_IFREG {
            return Err(ConfineError::NotFile {
                path: self.shown.clone(),
            });
        }
        if !new {
            ftruncate(&fd, 0).map_err(|e| io_err("truncate", &self.shown, e))?;
            // The file takes the metadata of this write only, as a new one would.
            crate::files::xattr::remove_prefixed(&fd, attrs_prefix).map_err(|source| {
                ConfineError::Io {
                    action: "clear the extended attributes of",
                    path: self.shown.clone(),
                    source,
                }
            })?;
        }
        if let Some((uid, gid)) = owner {
            fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                .map_err(|e| io_err("give the sandbox user", &self.shown, e))?;
        }
        let mut file = File::from(fd);
        let written =
            io::copy(&mut src.take(max.saturating_add(1)), &mut file).map_err(|source| {
                ConfineError::Io {
                    action: "write",
                    path: self.shown.clone(),
                    source,
                }
            })?;
        if written > max {
            // Cut back to nothing rather than left holding the first `max` bytes.
            let _ = ftruncate(&file, 0);
            return Err(ConfineError::TooLarge {
                path: self.shown.clone(),
                max,
            });
        }
        for (name, value) in attrs {
            crate::files::xattr::set(&file, name, value).map_err(|source| ConfineError::Io {
                action: "set the extended attributes of",
                path: self.shown.clone(),
                source,
            })?;
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Workspace;
    use std::os::unix::fs::MetadataExt;

    fn write(w: &Workspace, rel: &str, body: &str, max: u64) -> Result<u64, super::ConfineError> {
        let entry = w.entry(rel, true)?;
        let owner = Some((
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        ));
        entry.write_in_place_from(&mut body.as_bytes(), max, owner, "user.test.", &[])
    }

    #[test]
    fn a_file_is_written_where_it_stands_and_nothing_else_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let ws = dir.path();
        let uid = nix::unistd::getuid().as_raw();
        let w = Workspace::open(ws, (uid, nix::unistd::getgid().as_raw())).unwrap();
        assert_eq!(write(&w, "new.txt", "hello", 100).unwrap(), 5);
        let ino = std::fs::metadata(ws.join("new.txt")).unwrap().ino();
        // Written again: the same file (no temporary renamed over it), truncated first.
        write(&w, "new.txt", "hi", 100).unwrap();
        assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "hi");
        assert_eq!(std::fs::metadata(ws.join("new.txt")).unwrap().ino(), ino);
        // A link out is refused, never written through.
        std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("link")).unwrap();
        assert!(write(&w, "link", "mine", 100).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "s"
        );
        // A FIFO is refused too, without blocking on it.
        nix::unistd::mkfifo(
            &ws.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        assert!(write(&w, "fifo", "f", 100).is_err());
        // Past the bound: refused, and nothing half-written is left in the file.
        assert!(write(&w, "new.txt", "far too long", 4).is_err());
        assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "");
    }
}
