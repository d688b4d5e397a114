//! One live output stream as `moat run` passes it on: raw bytes from the sandbox in, text the
//! operator's terminal and CI log may show out — escape sequences and control characters
//! stripped (the sandbox's bytes are hostile), secrets redacted, both across chunk
//! boundaries. Nothing is capped: the cap is for a model's context, not for a log.

use super::{Redactor, Sanitizer};

/// See the module docs.
pub struct LiveText {
    /// Keeps a sequence cut between two chunks whole, so it is stripped, not half shown.
    sanitizer: Sanitizer,
    /// Holds back a suffix that may begin a secret until the next chunk decides it.
    redactor: Redactor,
}

impl LiveText {
    pub fn new(secrets: Vec<(String, String)>) -> Self {
        Self {
            sanitizer: Sanitizer::new(),
            redactor: Redactor::new(secrets),
        }
    }

    /// The text of `chunk` that can be shown now.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut clean = String::with_capacity(chunk.len());
        self.sanitizer.push(chunk, &mut clean);
        let mut out = String::with_capacity(clean.len());
        self.redactor.push(&clean, &mut out);
        out
    }

    /// Everything held back, at the end of the stream.
    pub fn finish(&mut self) -> String {
        let mut clean = String::new();
        self.sanitizer.finish(&mut clean);
        let mut out = String::new();
        self.redactor.push(&clean, &mut out);
        self.redactor.finish(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and returns all the text shown.
    fn shown(secrets: &[(&str, &str)], chunks: &[&[u8]]) -> String {
        let secrets = secrets
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let mut live = LiveText::new(secrets);
        let mut text: String = chunks.iter().map(|c| live.push(c)).collect();
        text.push_str(&live.finish());
        text
    }

    #[test]
    fn escapes_and_secrets_are_handled_across_chunks() {
        let rows: &[(&[&[u8]], &str)] = &[
            (&[b"line 1\n", b"line 2\n"], "line 1\nline 2\n"),
            // An escape sequence cut in two is still stripped whole.
            (&[b"red \x1b[3", b"1mtext\x1b[0m\n"], "red text\n"),
            // A secret cut in two is still redacted.
            (
                &[b"token=hunter", b"2hunter2\n"],
                "token=[REDACTED:TOKEN]\n",
            ),
            // Bytes that are not UTF-8 do not stop the stream.
            (&[b"a\xffb\n"], "a\u{fffd}b\n"),
        ];
        for (chunks, want) in rows {
            let got = shown(&[("TOKEN", "hunter2hunter2")], chunks);
            assert_eq!(&got, want, "{chunks:?}");
        }
    }

    #[test]
    fn a_long_stream_is_passed_on_whole() {
        let line = b"0123456789abcdef\n";
        let chunks: Vec<&[u8]> = std::iter::repeat_n(&line[..], 100_000).collect();
        let got = shown(&[], &chunks);
        assert_eq!(got.len(), line.len() * 100_000);
    }
}
