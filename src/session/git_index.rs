//! The gitlinks of a git index: the paths git treats as submodules, and so enters with a git
//! of their own (`git status` checks each one by running git inside it). Pure: bytes in,
//! paths out (`session::git_guard`, docs/security.md, "Host workspaces").
//!
//! The format is git's `Documentation/gitformat-index.txt`: a `DIRC` header (versions 2, 3
//! and 4), fixed-size entry headers whose object name is 20 (SHA-1) or 32 (SHA-256) bytes,
//! names NUL-terminated and padded to 8 bytes (2, 3) or prefix-compressed (4), then
//! extensions. A split index (`link` extension) keeps most entries in a shared index file,
//! whose name is returned so the caller reads that one too.

/// Mode of a gitlink entry (a submodule's commit).
const GITLINK: u32 = 0o160000;
/// Bytes of an entry before its object name: ctime, mtime, dev, ino, mode, uid, gid, size.
const STAT_BYTES: usize = 40;

/// What an index says about submodules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gitlinks {
    /// Each gitlink's path, relative to the work tree, as stored (`/`-separated).
    pub paths: Vec<String>,
    /// With a split index, the hex name of the shared index (`sharedindex.<hex>` in the git
    /// directory), which holds the entries this file does not.
    pub shared: Option<String>,
}

/// Why an index could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("it is not a git index (no DIRC signature)")]
    Signature,
    #[error("index version {0} is not one moat reads (2, 3 or 4)")]
    Version(u32),
    #[error("it ends inside entry {0}")]
    Truncated(u32),
}

/// The gitlinks of `bytes`; `hash_len` is 20 for SHA-1 repositories, 32 for SHA-256 ones.
pub fn gitlinks(bytes: &[u8], hash_len: usize) -> Result<Gitlinks, IndexError> {
    if bytes.len() < 12 || &bytes[..4] != b"DIRC" {
        return Err(IndexError::Signature);
    }
    let version = u32_at(bytes, 4).ok_or(IndexError::Signature)?;
    if !(2..=4).contains(&version) {
        return Err(IndexError::Version(version));
    }
    let count = u32_at(bytes, 8).ok_or(IndexError::Signature)?;
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    let mut out = Gitlinks::default();
    for n in 0..count {
        let short = || IndexError::Truncated(n);
        let start = at;
        let mode = u32_at(bytes, at + 24).ok_or_else(short)?;
        let flags_at = at + STAT_BYTES + hash_len;
        let flags = u16_at(bytes, flags_at).ok_or_else(short)?;
        at = flags_at + 2;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let name = if version == 4 {
            let (strip, used) = varint(bytes.get(at..).ok_or_else(short)?).ok_or_else(short)?;
            at += used;
            let end = nul(bytes, at).ok_or_else(short)?;
            let keep = previous
                .len()
                .checked_sub(strip as usize)
                .ok_or_else(short)?;
            let mut name = previous[..keep].to_vec();
            name.extend_from_slice(&bytes[at..end]);
            at = end + 1;
            name
        } else {
            let end = nul(bytes, at).ok_or_else(short)?;
            let name = bytes[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
            at = start + ((end - start + 8) & !7);
            name
        };
        if at > bytes.len() {
            return Err(short());
        }
        if mode == GITLINK {
            out.paths.push(String::from_utf8_lossy(&name).into_owned());
        }
        previous = name;
    }
    // Extensions: a 4-byte signature and a 32-bit size each, until the trailing checksum.
    let end = bytes.len().saturating_sub(hash_len);
    while at + 8 <= end {
        let size = u32_at(bytes, at + 4).unwrap_or(0) as usize;
        let data = at + 8;
        if &bytes[at..at + 4] == b"link" && data + hash_len <= end {
            out.shared = Some(hex::encode(&bytes[data..data + hash_len]));
        }
        at = match data.checked_add(size) {
            Some(next) => next,
            None => break,
        };
    }
    Ok(out)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn nul(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?
        .iter()
        .position(|c| *c == 0)
        .map(|p| from + p)
}

/// git's offset varint (`decode_varint`): 7 bits a byte, high bit = more, each continuation
/// adding one. Returns the value and the bytes used.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut used = 0;
    let mut c = *b.first()?;
    used += 1;
    let mut val = u64::from(c & 127);
    while c & 128 != 0 {
        val = val.checked_add(1)?;
        if val >> 57 != 0 {
            return None;
        }
        c = *b.get(used)?;
        used += 1;
        val = (val << 7) + u64::from(c & 127);
    }
    Some((val, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs git in `dir`.
    fn git(dir: &std::path::Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git is needed for this test");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn gitlinks_are_found_in_every_index_version() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        std::fs::create_dir_all(top.join("src/deep")).unwrap();
        git(&top, &["init", "-q"]);
        for f in ["a", "src/b", "src/deep/c"] {
            std::fs::write(top.join(f), "x").unwrap();
        }
        // Two nested repositories added as gitlinks (embedded repositories), one deep.
        for sub in ["vendor/lib", "src/deep/mod"] {
            let d = top.join(sub);
            std::fs::create_dir_all(&d).unwrap();
            git(&d, &["init", "-q"]);
            std::fs::write(d.join("f"), "y").unwrap();
            git(&d, &["add", "f"]);
            git(
                &d,
                &[
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "commit",
                    "-qm",
                    "i",
                ],
            );
        }
        git(&top, &["add", "a", "src/b", "src/deep/c"]);
        git(&top, &["add", "vendor/lib", "src/deep/mod"]);
        for version in ["2", "3", "4"] {
            git(&top, &["update-index", "--index-version", version]);
            let bytes = std::fs::read(top.join(".git/index")).unwrap();
            let got = gitlinks(&bytes, 20).unwrap();
            assert_eq!(got.paths, ["src/deep/mod", "vendor/lib"], "v{version}");
            assert_eq!(got.shared, None);
        }
        // A split index names its shared part.
        git(&top, &["update-index", "--index-version", "2"]);
        git(&top, &["update-index", "--split-index"]);
        let bytes = std::fs::read(top.join(".git/index")).unwrap();
        let got = gitlinks(&bytes, 20).unwrap();
        let shared = got.shared.expect("a split index names its shared index");
        let bytes = std::fs::read(top.join(format!(".git/sharedindex.{shared}"))).unwrap();
        assert_eq!(
            gitlinks(&bytes, 20).unwrap().paths,
            ["src/deep/mod", "vendor/lib"]
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(gitlinks(b"", 20), Err(IndexError::Signature));
        assert_eq!(
            gitlinks(b"XXXX\0\0\0\x02\0\0\0\0", 20),
            Err(IndexError::Signature)
        );
        assert_eq!(
            gitlinks(b"DIRC\0\0\0\x09\0\0\0\0", 20),
            Err(IndexError::Version(9))
        );
        assert_eq!(
            gitlinks(b"DIRC\0\0\0\x02\0\0\0\x05", 20),
            Err(IndexError::Truncated(0))
        );
        // Every prefix of a real index: an error or a result, never a panic.
        let mut header = b"DIRC\0\0\0\x04\0\0\0\x01".to_vec();
        header.extend(std::iter::repeat_n(0u8, 62));
        header.extend([0x85, 0xff, 0xff, 0x7f, b'a', 0]);
        for n in 0..header.len() {
            let _ = gitlinks(&header[..n], 20);
        }
        let _ = gitlinks(&header, 20);
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x80]), None);
    }
}
