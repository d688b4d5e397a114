//! The one read of an archive the sandbox can still write: every byte the parser takes from
//! it is also written to a file only moat holds, and the second pass reads that file
//! (docs/security.md, "moat cp"). Whatever the sandbox writes into its file after moat read a
//! part of it changes nothing moat makes.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// A reader over the sandbox's archive that keeps what it hands out.
pub(super) struct Spool<R> {
    /// The sandbox's archive, read once, front to back, and never past `limit` bytes.
    source: BufReader<io::Take<R>>,
    /// moat's own copy: exactly the bytes the parser consumed, in order.
    copy: BufWriter<File>,
    /// Why writing the copy failed, if it did: reported instead of the read error the parser
    /// then sees.
    failed: Option<io::Error>,
}

impl<R: Read> Spool<R> {
    /// Reads `source` (at most `limit` bytes) into `copy`, which must be empty, moat's own,
    /// and open for reading and writing.
    pub(super) fn new(source: R, copy: File, limit: u64) -> Self {
        Self {
            source: BufReader::with_capacity(1 << 16, source.take(limit)),
            copy: BufWriter::with_capacity(1 << 16, copy),
            failed: None,
        }
    }

    /// The copy, complete and rewound for the second pass.
    pub(super) fn finish(self) -> io::Result<File> {
        let mut copy = self.copy.into_inner().map_err(|e| e.into_error())?;
        copy.seek(SeekFrom::Start(0))?;
        Ok(copy)
    }

    /// Takes the error writing the copy met, if any.
    pub(super) fn failure(&mut self) -> Option<io::Error> {
        self.failed.take()
    }
}

impl<R: Read> Read for Spool<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.source.read(buf)?;
        if let Err(e) = self.copy.write_all(&buf[..n]) {
            let kind = e.kind();
            self.failed = Some(e);
            return Err(io::Error::new(kind, "keep moat's copy of the archive"));
        }
        Ok(n)
    }
}
