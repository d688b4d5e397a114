//! The buffer a process log is read into: it starts small and doubles, up to its cap, each
//! time a read fills it. Most commands print little, and a buffer of the cap's size would be
//! zeroed for every one of them (a megabyte per command for the supervisor, a quarter for each
//! stream a foreground call passes on); one that prints a lot reaches the cap within a few
//! reads.

/// The first size of every buffer.
const START: usize = 16 << 10;

pub struct ReadBuf {
    /// What reads go into; its length is the current size.
    buf: Vec<u8>,
    /// The size it grows to at most.
    max: usize,
}

impl ReadBuf {
    pub fn new(max: usize) -> Self {
        Self {
            buf: vec![0; START.min(max)],
            max,
        }
    }

    /// Where the next read goes.
    pub fn space(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// What the last read put there: its first `n` bytes.
    pub fn got(&self, n: usize) -> &[u8] {
        &self.buf[..n]
    }

    /// Whether a read of `n` bytes filled the buffer (more may be waiting); a full one
    /// doubles it, up to the cap, for the next read.
    pub fn filled(&mut self, n: usize) -> bool {
        let full = n == self.buf.len();
        if full && self.buf.len() < self.max {
            self.buf.resize((self.buf.len() * 2).min(self.max), 0);
        }
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_only_while_reads_fill_it() {
        let mut b = ReadBuf::new(64 << 10);
        assert_eq!(b.space().len(), START);
        assert!(!b.filled(100));
        assert_eq!(b.space().len(), START);
        let mut sizes = Vec::new();
        for _ in 0..4 {
            let n = b.space().len();
            assert!(b.filled(n));
            sizes.push(b.space().len());
        }
        assert_eq!(sizes, [32 << 10, 64 << 10, 64 << 10, 64 << 10]);
        let mut small = ReadBuf::new(1000);
        assert_eq!(small.space().len(), 1000);
        assert!(small.filled(1000));
        assert_eq!(small.space().len(), 1000);
    }
}
