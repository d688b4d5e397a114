//! E2B's `EntryInfo`, made from what `files::confine` found (docs/e2b.md, "Files"): the
//! type, the permission bits and their text as Go prints a file mode (`-rw-r--r--`), owner and
//! group names as the container names them, the modification time, the size, and for a
//! symbolic link the type and mode of what it leads to with that path. Pure.

use std::collections::{BTreeMap, HashMap};

use nix::sys::stat::{FileStat, SFlag};
use serde::Serialize;

use super::paths::HomePath;
use crate::files::Found;

/// The longest user or group name kept from the container's tables.
const MAX_NAME: usize = 256;

/// E2B's file types. Anything but a file, a directory or a link E2B can follow (a pipe, a
/// socket, a device) is `UNSPECIFIED`, which the SDK leaves out of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FileType {
    #[serde(rename = "FILE_TYPE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "FILE_TYPE_FILE")]
    File,
    #[serde(rename = "FILE_TYPE_DIRECTORY")]
    Directory,
    #[serde(rename = "FILE_TYPE_SYMLINK")]
    Symlink,
}

/// One entry as E2B's filesystem service answers it (proto3 JSON: `size` is an int64, sent
/// as text; fields at their default are left out, as the SDK's own server does).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FileType,
    pub path: String,
    pub size: String,
    pub mode: u32,
    pub permissions: String,
    pub owner: String,
    pub group: String,
    pub modified_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// 2.63's flag: the entry itself is a link and `type` describes what it leads to.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_symlink: bool,
}

/// The container's user and group names by id (its `/etc/passwd` and `/etc/group`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

/// `name:x:id:…` lines into id → name (the first name of an id wins, as for `ls`).
fn table(text: &str) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(id)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let Ok(id) = id.parse::<u32>() else { continue };
        if name.is_empty() || name.len() > MAX_NAME {
            continue;
        }
        out.entry(id).or_insert_with(|| name.to_string());
    }
    out
}

impl Names {
    /// From the text of the container's passwd and group tables.
    pub fn parse(passwd: &str, group: &str) -> Self {
        Self {
            users: table(passwd),
            groups: table(group),
        }
    }

    /// A user's name, or its number when the container has no name for it.
    pub fn user(&self, uid: u32) -> String {
        self.users
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    pub fn group(&self, gid: u32) -> String {
        self.groups
            .get(&gid)
            .cloned()
            .unwrap_or_else(|| gid.to_string())
    }
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

fn file_type(st: &FileStat) -> FileType {
    match kind(st) {
        SFlag::S_IFREG => FileType::File,
        SFlag::S_IFDIR => FileType::Directory,
        SFlag::S_IFLNK => FileType::Symlink,
        _ => FileType::Unspecified,
    }
}

/// A mode as Go's `FileMode.String()` prints it: the type and special letters (`dalTLDpSugct?`
/// order; `-` when there are none), then `rwx` three times.
pub fn permissions(st_mode: u32) -> String {
    let k = SFlag::from_bits_truncate(st_mode & SFlag::S_IFMT.bits());
    let mut out = String::new();
    let letters = [
        (k == SFlag::S_IFDIR, 'd'),
        (k == SFlag::S_IFLNK, 'L'),
        (k == SFlag::S_IFBLK || k == SFlag::S_IFCHR, 'D'),
        (k == SFlag::S_IFIFO, 'p'),
        (k == SFlag::S_IFSOCK, 'S'),
        (st_mode & 0o4000 != 0, 'u'),
        (st_mode & 0o2000 != 0, 'g'),
        (k == SFlag::S_IFCHR, 'c'),
        (st_mode & 0o1000 != 0, 't'),
    ];
    out.extend(letters.iter().filter(|(on, _)| *on).map(|(_, c)| *c));
    if out.is_empty() {
        out.push('-');
    }
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        out.push(if st_mode & (1 << (8 - i)) != 0 {
            c
        } else {
            '-'
        });
    }
    out
}

/// A time as RFC 3339 in UTC with nanoseconds, as proto3's `Timestamp` is written.
fn timestamp(secs: i64, nanos: i64) -> String {
    chrono::DateTime::from_timestamp(secs, nanos.clamp(0, 999_999_999) as u32)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The entry for what was found. A link that resolves beneath the home reports what it
/// leads to (type, mode, permissions) and that path; one that leads out or nowhere reports
/// itself as a link and its text (moat never follows it). `None` when the entry's own path is
/// not UTF-8; a link whose target is not reports itself without `symlinkTarget`: no answer
/// names a path that opens another file than the one found (docs/e2b.md, "Files").
pub fn entry_info(
    found: &Found,
    names: &Names,
    metadata: BTreeMap<String, String>,
) -> Option<EntryInfo> {
    let at = HomePath::of(&found.rel)?;
    let st = &found.st;
    let (shown_st, symlink_target) = match &found.link {
        Some(link) => match &link.target {
            Some((target_st, target)) => match HomePath::of(target) {
                Some(t) => (*target_st, Some(t.shown())),
                None => (*st, None),
            },
            None => (*st, link.text.to_str().map(str::to_string)),
        },
        None => (*st, None),
    };
    Some(EntryInfo {
        name: at.name(),
        kind: file_type(&shown_st),
        path: at.shown(),
        size: st.st_size.max(0).to_string(),
        mode: shown_st.st_mode & 0o777,
        permissions: permissions(shown_st.st_mode),
        owner: names.user(st.st_uid),
        group: names.group(st.st_gid),
        modified_time: timestamp(st.st_mtime, st.st_mtime_nsec),
        symlink_target,
        metadata,
        is_symlink: found.link.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_print_as_go_prints_them() {
        for (mode, want) in [
            (0o100644, "-rw-r--r--"),
            (0o040755, "drwxr-xr-x"),
            (0o120777, "Lrwxrwxrwx"),
            (0o010600, "prw-------"),
            (0o140755, "Srwxr-xr-x"),
            (0o020666, "Dcrw-rw-rw-"),
            (0o060660, "Drw-rw----"),
            (0o104755, "urwxr-xr-x"),
            (0o041777, "dtrwxrwxrwx"),
            (0o042775, "dgrwxrwxr-x"),
            (0o100000, "----------"),
        ] {
            assert_eq!(permissions(mode), want, "{mode:o}");
        }
        assert_eq!(
            timestamp(1_704_164_645, 123_456_789),
            "2024-01-02T03:04:05.123456789Z"
        );
        assert_eq!(timestamp(0, 0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn names_come_from_the_containers_tables() {
        let n = Names::parse(
            "root:x:0:0:root:/root:/bin/bash\nsandbox:x:1000:1000::/home/sandbox:/bin/bash\nalias:x:1000:1000::/:/bin/sh\nbroken\n:x:5:5\n",
            "root:x:0:\nsandbox:x:1000:\n",
        );
        assert_eq!(n.user(0), "root");
        assert_eq!(n.user(1000), "sandbox", "the first name of an id wins");
        assert_eq!(n.group(1000), "sandbox");
        assert_eq!(n.user(5), "5");
        assert_eq!(n.group(77), "77");
    }

    #[test]
    fn no_entry_names_a_path_lossily() {
        use crate::files::Link;
        use std::os::unix::ffi::OsStrExt;
        use std::path::PathBuf;
        let dir = tempfile::tempdir().unwrap();
        let st = nix::sys::stat::lstat(dir.path()).unwrap();
        let bad = || PathBuf::from(std::ffi::OsStr::from_bytes(b"a\xff"));
        let names = Names::default();
        let found = |rel: PathBuf, link: Option<Link>| Found { rel, st, link };
        assert!(entry_info(&found(bad(), None), &names, BTreeMap::new()).is_none());
        let ok = entry_info(&found("a\u{fffd}".into(), None), &names, BTreeMap::new()).unwrap();
        assert_eq!(ok.path, "/home/user/a\u{fffd}");
        // A link to a name that is not UTF-8 is shown as a link, its target left out.
        let link = Link {
            text: bad().into_os_string(),
            target: Some((st, bad())),
        };
        let l = entry_info(&found("l".into(), Some(link)), &names, BTreeMap::new()).unwrap();
        assert_eq!((l.symlink_target, l.is_symlink), (None, true));
        let dangling = Link {
            text: bad().into_os_string(),
            target: None,
        };
        let l = entry_info(&found("l".into(), Some(dangling)), &names, BTreeMap::new()).unwrap();
        assert_eq!(l.symlink_target, None);
    }

    #[test]
    fn entries_serialize_as_proto3_json() {
        let e = EntryInfo {
            name: "a".into(),
            kind: FileType::File,
            path: "/home/user/a".into(),
            size: "4".into(),
            mode: 0o644,
            permissions: "-rw-r--r--".into(),
            owner: "user".into(),
            group: "user".into(),
            modified_time: "2024-01-02T03:04:05Z".into(),
            symlink_target: None,
            metadata: BTreeMap::new(),
            is_symlink: false,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"name": "a", "type": "FILE_TYPE_FILE", "path": "/home/user/a",
                "size": "4", "mode": 420, "permissions": "-rw-r--r--", "owner": "user",
                "group": "user", "modifiedTime": "2024-01-02T03:04:05Z"})
        );
    }
}
