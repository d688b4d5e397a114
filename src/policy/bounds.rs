//! The pre-scan that bounds what the shell parser is handed (docs/security.md, "Command
//! parsing bounds").
//!
//! brush-parser recurses once (or more) per nesting level, in its tokenizer, its grammar and its
//! word grammar, and a stack overflow aborts the whole process; its grammar also backtracks
//! exponentially over unclosed parentheses (`((((…1` doubles the work per `(`). So before any
//! text reaches it, this scan measures the text without recursing: its size, how deep its
//! constructs nest, and how deep its parentheses nest.
//!
//! The scan follows the tokenizer's quoting rules (single, double and ANSI-C quotes, escapes,
//! backquotes, comments, here-documents, extended globs) so that what it sees as quoted is what
//! the parser sees as quoted; where the two could disagree it errs towards counting more. Every
//! opener counts wherever it stands (`if` as an argument counts too); a closer only counts where
//! it closes the innermost open construct of its kind.

use thiserror::Error;

/// The limits a command is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The longest command accepted, in bytes: it bounds the parse time of flat input.
    pub max_bytes: usize,
    /// The deepest nesting of constructs accepted: it bounds the parser's stack.
    pub max_depth: usize,
    /// The deepest nesting of constructs the parser tries two ways, re-parsing what they hold
    /// (parentheses: `(`, `((`, `$(`, `$((`; `${`; `case`; the `!`, `&&`, `||` and `(` of `[[ ]]`): it
    /// bounds the parser's backtracking, which doubles per level.
    pub max_parens: usize,
}

/// The limits in force (measured figures in docs/security.md).
pub const BOUNDS: Bounds = Bounds {
    max_bytes: 64 * 1024,
    max_depth: 32,
    max_parens: 10,
};

/// Why a command is refused before it is parsed. Messages complete "refused: …".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BoundsError {
    /// More bytes than [`Bounds::max_bytes`].
    #[error("command is longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// Constructs nested deeper than [`Bounds::max_depth`].
    #[error("command nests deeper than {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// Parentheses (or `case`, or `[[ ]]` operators) nested deeper than [`Bounds::max_parens`].
    #[error(
        "command nests substitutions, parentheses or case statements deeper than {max} levels"
    )]
    TooManyParens {
        /// The limit.
        max: usize,
    },
    /// A comment inside `$( … )` holding shell syntax (quotes, parentheses, braces, `$`): the
    /// parser does not always see such a comment as one, so what follows it cannot be measured
    /// reliably.
    #[error("command has shell syntax in a comment inside $( … ); move the comment out")]
    QuotedComment,
    /// `<<` or `<<-` with no delimiter word, or an empty one (`<<''`): no shell accepts it
    /// usefully, and brush-parser 0.4.0 loops allocating without end on it inside `$( … )`
    /// (`$(` newline `(x << && y)`: docs/security.md, "Command parsing bounds").
    #[error("command has a here-document without a delimiter word")]
    HereDocWithoutDelimiter,
    /// The analysis did not finish within the caller's deadline. Never returned by [`check`];
    /// the caller that runs the parse under a deadline reports it.
    #[error("command took too long to analyse")]
    TookTooLong,
}

/// Checks `command` against [`BOUNDS`].
pub fn check(command: &str) -> Result<(), BoundsError> {
    check_with(command, &BOUNDS)
}

/// Checks `command` against `bounds`.
pub fn check_with(command: &str, bounds: &Bounds) -> Result<(), BoundsError> {
    if command.len() > bounds.max_bytes {
        return Err(BoundsError::TooLong {
            max: bounds.max_bytes,
        });
    }
    let mut scanner = Scanner::new(command.as_bytes(), bounds, 0, 0);
    scanner.run()
}

/// An open construct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `(`: a subshell, one half of `((`, a function's `()`, a pattern's `(`.
    Paren,
    /// `$(`, closed by `)`.
    CmdSub,
    /// `$[`, closed by `]`.
    Bracket,
    /// `${`, closed by `}`.
    Param,
    /// `{` as a word, closed by `}` where a command starts.
    Brace,
    /// `"`: only `$`, backquotes and backslashes act inside.
    DQuote,
    /// A here-document body that expands: like double quotes, without a closing quote.
    HereBody,
    /// `[[`, closed by `]]`.
    Test,
    /// `if`, closed by `fi`.
    If,
    /// `case`, closed by `esac`; a `)` inside it ends a pattern.
    Case,
    /// `for`, `while`, `until`, `select`, closed by `done`.
    Loop,
}

impl Frame {
    /// Whether this frame counts towards the backtracking bound: the parser tries a `(` as
    /// arithmetic and as a subshell, a `case` item with and without its `;;`, and the word
    /// grammar a `${` as each kind of expansion (an unclosed one in a here-document body hung
    /// the fuzz target), each time re-parsing what is nested inside.
    fn is_paren(self) -> bool {
        matches!(
            self,
            Frame::Paren | Frame::CmdSub | Frame::Bracket | Frame::Param | Frame::Case
        )
    }

    /// Whether text in this frame is lexed like double-quoted text.
    fn is_quoted(self) -> bool {
        matches!(self, Frame::DQuote | Frame::HereBody)
    }
}

/// A here-document whose body starts after the current line.
#[derive(Debug, Clone)]
struct PendingHereDoc {
    /// The delimiter with its quotes removed.
    tag: Vec<u8>,
    /// `<<-`: leading tabs are stripped from body lines and the delimiter line.
    strip_tabs: bool,
    /// Whether the body expands (no quote in the delimiter).
    expands: bool,
}

/// The scan's state.
struct Scanner<'a> {
    /// The text.
    s: &'a [u8],
    /// The position of the next byte.
    i: usize,
    /// The limits.
    bounds: &'a Bounds,
    /// Open constructs, innermost last.
    stack: Vec<Frame>,
    /// Nesting inherited from an enclosing text (a here-document body's command).
    base_depth: usize,
    /// Parentheses inherited from an enclosing text.
    base_parens: usize,
    /// Parentheses currently open in `stack`.
    parens: usize,
    /// The current unquoted word's bytes, for reserved-word detection; `None` once the word
    /// holds anything quoted or escaped.
    word: Option<Vec<u8>>,
    /// Whether a word (token) has started: decides comments and extended globs, as in the
    /// tokenizer.
    word_started: bool,
    /// The last byte appended to the current word.
    word_last: Option<u8>,
    /// Whether the next word stands where a command starts (closers only count there).
    command_position: bool,
    /// Inside `((` or `$((`, where `<<` is a shift and not a here-document.
    arithmetic: bool,
    /// Here-documents whose bodies start at the next newline.
    pending: Vec<PendingHereDoc>,
    /// Per open `[[`, the `&&`, `||` and `!` seen in it: the parser builds a tree as deep as
    /// their count, and backtracks over it.
    test_ops: Vec<usize>,
    /// Levels that never close: each `coproc` nests the command after it one level deeper.
    unclosed: usize,
}

impl<'a> Scanner<'a> {
    fn new(s: &'a [u8], bounds: &'a Bounds, base_depth: usize, base_parens: usize) -> Self {
        Scanner {
            s,
            i: 0,
            bounds,
            stack: Vec::new(),
            base_depth,
            base_parens,
            parens: 0,
            word: Some(Vec::new()),
            word_started: false,
            word_last: None,
            command_position: true,
            arithmetic: false,
            pending: Vec::new(),
            test_ops: Vec::new(),
            unclosed: 0,
        }
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.s.get(self.i + ahead).copied()
    }

    fn top(&self) -> Option<Frame> {
        self.stack.last().copied()
    }

    /// Opens a construct, failing when a bound is passed.
    fn push(&mut self, frame: Frame) -> Result<(), BoundsError> {
        self.stack.push(frame);
        if frame == Frame::Test {
            self.test_ops.push(0);
        }
        if frame.is_paren() {
            self.parens += 1;
        }
        self.check_depth(0, 0)
    }

    /// Fails when the current nesting plus `extra` levels (of which `extra_parens` are
    /// parentheses) passes a bound.
    fn check_depth(&self, extra: usize, extra_parens: usize) -> Result<(), BoundsError> {
        if self.base_parens + self.parens + extra_parens > self.bounds.max_parens {
            return Err(BoundsError::TooManyParens {
                max: self.bounds.max_parens,
            });
        }
        if self.base_depth + self.unclosed + self.stack.len() + extra > self.bounds.max_depth {
            return Err(BoundsError::TooDeep {
                max: self.bounds.max_depth,
            });
        }
        Ok(())
    }

    fn pop(&mut self) {
        if let Some(frame) = self.stack.pop() {
            if frame.is_paren() {
                self.parens -= 1;
            }
            if frame == Frame::Test {
                self.test_ops.pop();
            }
        }
    }

    /// Counts an operator of a `[[ ]]` expression, when one is open.
    fn test_operator(&mut self) -> Result<(), BoundsError> {
        if !self.stack.contains(&Frame::Test) {
            return Ok(());
        }
        if let Some(count) = self.test_ops.last_mut() {
            *count += 1;
            let extra = *count;
            self.check_depth(extra, extra)?;
        }
        Ok(())
    }

    /// Whether any enclosing construct is a `$( … )`, where the tokenizer lexes comments
    /// differently from a shell.
    fn in_substitution(&self) -> bool {
        self.stack.contains(&Frame::CmdSub)
    }

    fn run(&mut self) -> Result<(), BoundsError> {
        while let Some(c) = self.peek(0) {
            if self.top().is_some_and(Frame::is_quoted) {
                self.quoted_byte(c)?;
            } else {
                self.code_byte(c)?;
            }
        }
        self.end_word()
    }

    /// One step inside double quotes or an expanding here-document body.
    fn quoted_byte(&mut self, c: u8) -> Result<(), BoundsError> {
        match c {
            b'"' if self.top() == Some(Frame::DQuote) => {
                self.i += 1;
                self.pop();
            }
            b'\\' => self.i += 2,
            b'`' => self.backquote(),
            b'$' => self.dollar()?,
            _ => self.i += 1,
        }
        Ok(())
    }

    /// One step in unquoted text.
    fn code_byte(&mut self, c: u8) -> Result<(), BoundsError> {
        match c {
            b' ' | b'\t' => {
                self.end_word()?;
                self.i += 1;
            }
            b'\n' => {
                self.end_word()?;
                self.i += 1;
                self.command_position = true;
                if !self.pending.is_empty() {
                    self.here_bodies()?;
                }
            }
            b';' | b'&' | b'|' => {
                self.end_word()?;
                if matches!((c, self.peek(1)), (b'&', Some(b'&')) | (b'|', Some(b'|'))) {
                    self.i += 1;
                    self.test_operator()?;
                }
                self.i += 1;
                self.command_position = true;
            }
            b'(' => {
                if self.extglob_starts() {
                    return self.extglob();
                }
                self.end_word()?;
                self.i += 1;
                if self.peek(0) == Some(b'(') {
                    self.arithmetic = true;
                }
                self.push(Frame::Paren)?;
                self.command_position = true;
            }
            b')' => {
                self.end_word()?;
                self.i += 1;
                if self.peek(0) == Some(b')') {
                    self.arithmetic = false;
                }
                self.close_paren();
                self.command_position = true;
            }
            b'<' | b'>' => {
                self.end_word()?;
                let heredoc = c == b'<'
                    && self.peek(1) == Some(b'<')
                    && self.peek(2) != Some(b'<')
                    && !self.arithmetic;
                if heredoc {
                    self.i += 2;
                    let strip_tabs = self.peek(0) == Some(b'-');
                    if strip_tabs {
                        self.i += 1;
                    }
                    self.here_tag(strip_tabs)?;
                } else {
                    self.i += 1;
                    while matches!(self.peek(0), Some(b'<' | b'>' | b'&' | b'|')) {
                        self.i += 1;
                    }
                }
                self.command_position = false;
            }
            b'\'' => {
                let ansi_c = self.word_last == Some(b'$');
                self.mark_quoted();
                self.i += 1;
                self.single_quote(ansi_c);
            }
            b'"' => {
                self.mark_quoted();
                self.i += 1;
                self.push(Frame::DQuote)?;
            }
            b'\\' => {
                if self.peek(1) == Some(b'\n') {
                    self.i += 2;
                } else {
                    self.mark_quoted();
                    self.word_last = self.peek(1);
                    self.i += 2;
                }
            }
            b'`' => {
                self.mark_quoted();
                self.backquote();
            }
            b'$' => {
                self.append(c);
                self.dollar()?;
            }
            b'#' if !self.word_started && self.top() != Some(Frame::Param) => self.comment()?,
            b'}' if self.innermost(&[Frame::Param, Frame::CmdSub]) == Some(Frame::Param) => {
                self.end_word()?;
                self.i += 1;
                self.close_to(Frame::Param);
            }
            b']' if self.innermost(&[Frame::Bracket, Frame::CmdSub, Frame::Param])
                == Some(Frame::Bracket) =>
            {
                self.end_word()?;
                self.i += 1;
                self.close_to(Frame::Bracket);
            }
            _ => {
                self.append(c);
                self.i += 1;
            }
        }
        Ok(())
    }

    /// Adds a plain byte to the current word.
    fn append(&mut self, c: u8) {
        if let Some(word) = &mut self.word {
            word.push(c);
        }
        self.word_started = true;
        self.word_last = Some(c);
    }

    /// The innermost open frame among `kinds`, looking no further out than the nearest double
    /// quote or here-document body (inside those, the tokenizer reads a fresh word).
    fn innermost(&self, kinds: &[Frame]) -> Option<Frame> {
        self.stack
            .iter()
            .rev()
            .take_while(|f| !f.is_quoted())
            .find(|f| kinds.contains(f))
            .copied()
    }

    /// Closes frames down to and including the innermost `frame`. Inside `${ }`, `$[ ]` and
    /// `$( )` the tokenizer only looks for its terminator (counting parentheses flatly in
    /// `$( )`): reserved words opened inside do not keep it open, even a `case` whose pattern
    /// `)` ends a `$( )` there. The text inside is parsed, and bounded, on its own later.
    fn close_to(&mut self, frame: Frame) {
        while let Some(top) = self.top() {
            self.pop();
            if top == frame {
                break;
            }
        }
        self.continue_word();
    }

    /// At an unquoted `)`: closes the innermost `(` or `$(`. Outside any `$( )` only a `(` on
    /// top closes (a `case` pattern's `)` closes nothing); inside one, the tokenizer counts
    /// parentheses flatly, so the innermost `(` or `$(` closes whatever is open above it.
    fn close_paren(&mut self) {
        match self.innermost(&[Frame::Paren, Frame::CmdSub, Frame::Param, Frame::Bracket]) {
            Some(Frame::Paren) if self.top() == Some(Frame::Paren) => self.pop(),
            Some(Frame::Paren)
                if self.innermost(&[Frame::CmdSub, Frame::Param, Frame::Bracket])
                    == Some(Frame::CmdSub) =>
            {
                while let Some(top) = self.top() {
                    self.pop();
                    if top == Frame::Paren {
                        break;
                    }
                }
            }
            Some(Frame::CmdSub) => self.close_to(Frame::CmdSub),
            _ => {}
        }
    }

    /// After a substitution closes: the word it stands in goes on, and is no reserved word.
    fn continue_word(&mut self) {
        self.word = None;
        self.word_started = true;
        self.word_last = Some(b')');
    }

    /// The current word holds something quoted, so it is no reserved word.
    fn mark_quoted(&mut self) {
        self.word = None;
        self.word_started = true;
    }

    /// Ends the current word, opening or closing what a reserved word opens or closes.
    fn end_word(&mut self) -> Result<(), BoundsError> {
        let word = self.word.replace(Vec::new());
        let started = std::mem::replace(&mut self.word_started, false);
        self.word_last = None;
        if !started {
            return Ok(());
        }
        let at_command = std::mem::replace(&mut self.command_position, false);
        // Inside `${ }` and `$[ ]` words are operands, never reserved words.
        if matches!(self.top(), Some(Frame::Param | Frame::Bracket)) {
            return Ok(());
        }
        let Some(word) = word else { return Ok(()) };
        let opens = match word.as_slice() {
            b"if" => Some(Frame::If),
            b"case" => Some(Frame::Case),
            b"for" | b"while" | b"until" | b"select" => Some(Frame::Loop),
            b"{" => Some(Frame::Brace),
            b"[[" => Some(Frame::Test),
            _ => None,
        };
        if let Some(frame) = opens {
            self.push(frame)?;
            self.command_position = true;
            return Ok(());
        }
        if word.as_slice() == b"coproc" {
            self.unclosed += 1;
            self.check_depth(0, 0)?;
            self.command_position = true;
            return Ok(());
        }
        let closes = match word.as_slice() {
            b"fi" if at_command => Some(Frame::If),
            b"esac" if at_command => Some(Frame::Case),
            b"done" if at_command => Some(Frame::Loop),
            b"}" if at_command => Some(Frame::Brace),
            b"]]" => Some(Frame::Test),
            _ => None,
        };
        if let Some(frame) = closes {
            if self.top() == Some(frame) {
                self.pop();
            }
        }
        // Not after `in`: `for x in done` must not close the loop it opens.
        if word.as_slice() == b"!" {
            self.test_operator()?;
        }
        if matches!(
            word.as_slice(),
            b"then" | b"do" | b"else" | b"elif" | b"!" | b"time"
        ) {
            self.command_position = true;
        }
        Ok(())
    }

    /// After an unquoted `'`: skips to the closing quote (ANSI-C quotes honour escapes).
    fn single_quote(&mut self, ansi_c: bool) {
        while let Some(c) = self.peek(0) {
            self.i += 1;
            if ansi_c && c == b'\\' {
                self.i += 1;
            } else if c == b'\'' {
                return;
            }
        }
    }

    /// Skips a backquoted command: the tokenizer takes everything up to the next unescaped
    /// backquote as text, and its content is parsed (and bounded) on its own later.
    fn backquote(&mut self) {
        self.i += 1;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            if c == b'\\' {
                self.i += 1;
            } else if c == b'`' {
                return;
            }
        }
    }

    /// At a `$`: opens `$(`, `$((`, `${` or `$[`.
    fn dollar(&mut self) -> Result<(), BoundsError> {
        self.i += 1;
        match self.peek(0) {
            Some(b'(') => {
                self.i += 1;
                self.push(Frame::CmdSub)?;
                if self.peek(0) == Some(b'(') {
                    self.i += 1;
                    self.arithmetic = true;
                    self.push(Frame::Paren)?;
                }
                // Tokens inside start afresh, where a command starts.
                self.command_position = true;
                self.word = Some(Vec::new());
                self.word_started = false;
                self.word_last = None;
            }
            Some(b'{') => {
                self.i += 1;
                self.push(Frame::Param)?;
                self.word = None;
            }
            Some(b'[') => {
                self.i += 1;
                self.push(Frame::Bracket)?;
                self.word = None;
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether a `(` here continues the word as an extended glob (`@(…)`, `!(…)`, …), as the
    /// tokenizer decides: the word so far ends with one of `@!?+*`.
    fn extglob_starts(&self) -> bool {
        self.word_started && matches!(self.word_last, Some(b'@' | b'!' | b'?' | b'+' | b'*'))
    }

    /// Skips an extended glob the way the tokenizer does (parentheses and escapes only), and
    /// counts its parentheses, which the word grammar recurses into.
    fn extglob(&mut self) -> Result<(), BoundsError> {
        self.mark_quoted();
        let mut depth = 0usize;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'(' => {
                    depth += 1;
                    self.check_depth(depth, depth)?;
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        self.word_last = Some(b')');
        Ok(())
    }

    /// At a `#` that starts a comment: skips to the end of the line.
    ///
    /// Inside `$( … )` the tokenizer keeps a `#` after two blanks, or after an operator and a
    /// blank, in the word where a shell starts a comment (and in a here-document body the word
    /// grammar knows no comments at all); shell syntax in such a comment would then act for one
    /// and not the other, so it is refused.
    fn comment(&mut self) -> Result<(), BoundsError> {
        let start = self.i;
        while let Some(c) = self.peek(0) {
            if c == b'\n' {
                break;
            }
            self.i += 1;
        }
        let text = &self.s[start..self.i];
        let syntax = |c: &u8| {
            matches!(
                c,
                b'\'' | b'"' | b'`' | b'\\' | b'(' | b')' | b'{' | b'}' | b'$' | b'['
            )
        };
        if self.in_substitution() && text.iter().any(syntax) {
            return Err(BoundsError::QuotedComment);
        }
        Ok(())
    }

    /// After `<<` or `<<-`: reads the delimiter word and records the pending body.
    fn here_tag(&mut self, strip_tabs: bool) -> Result<(), BoundsError> {
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        let mut tag = Vec::new();
        let mut expands = true;
        let mut quote: Option<u8> = None;
        while let Some(c) = self.peek(0) {
            match quote {
                Some(q) if c == q => {
                    quote = None;
                    self.i += 1;
                }
                Some(_) => {
                    tag.push(c);
                    self.i += 1;
                }
                None => match c {
                    b'\'' | b'"' => {
                        expands = false;
                        quote = Some(c);
                        self.i += 1;
                    }
                    b'\\' => {
                        expands = false;
                        if let Some(next) = self.peek(1) {
                            tag.push(next);
                        }
                        self.i += 2;
                    }
                    b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' => break,
                    _ => {
                        tag.push(c);
                        self.i += 1;
                    }
                },
            }
        }
        if tag.is_empty() {
            return Err(BoundsError::HereDocWithoutDelimiter);
        }
        self.pending.push(PendingHereDoc {
            tag,
            strip_tabs,
            expands,
        });
        Ok(())
    }

    /// At the start of the line after a command with here-documents: skips their bodies,
    /// measuring the expanding ones as double-quoted text nested where the command stands.
    fn here_bodies(&mut self) -> Result<(), BoundsError> {
        for doc in std::mem::take(&mut self.pending) {
            let start = self.i;
            let mut end = self.s.len();
            loop {
                if self.i >= self.s.len() {
                    break;
                }
                let line_start = self.i;
                let line_end = self.s[self.i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(self.s.len(), |p| self.i + p);
                self.i = (line_end + 1).min(self.s.len());
                let mut line = &self.s[line_start..line_end];
                if doc.strip_tabs {
                    while let [b'\t', rest @ ..] = line {
                        line = rest;
                    }
                }
                if line == doc.tag.as_slice() {
                    end = line_start;
                    break;
                }
            }
            let body = &self.s[start..end];
            // Inside `$( )` the word grammar knows no here-documents: it parses the body as
            // command text, so the body is measured as code too (the fuzz target hung on
            // unclosed parentheses there). It stays inside the substitution, so here-documents
            // in it are measured the same way.
            if self.in_substitution() {
                let mut inner = Scanner::new(
                    body,
                    self.bounds,
                    self.base_depth + self.stack.len(),
                    self.base_parens + self.parens,
                );
                inner.push(Frame::CmdSub)?;
                inner.run()?;
            }
            if doc.expands {
                let mut inner = Scanner::new(
                    body,
                    self.bounds,
                    self.base_depth + self.stack.len(),
                    self.base_parens + self.parens,
                );
                inner.stack.push(Frame::HereBody);
                inner.check_depth(0, 0)?;
                inner.run()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Bounds = Bounds {
        max_bytes: 256,
        max_depth: 4,
        max_parens: 3,
    };

    fn deep(open: &str, middle: &str, close: &str, n: usize) -> String {
        format!("{}{}{}", open.repeat(n), middle, close.repeat(n))
    }

    #[test]
    fn attack_inputs_are_refused() {
        let braces = deep("{ ", "true; ", "}; ", 400);
        assert_eq!(check(&braces), Err(BoundsError::TooDeep { max: 32 }));
        let parens = format!("{}1", "((".repeat(16));
        assert_eq!(check(&parens), Err(BoundsError::TooManyParens { max: 10 }));
        // Found by the fuzz target: unclosed `case` items backtrack like parentheses.
        let cases = format!("{}ls", "case x in x) ".repeat(17));
        assert_eq!(check(&cases), Err(BoundsError::TooManyParens { max: 10 }));
        let coprocs = format!("{}true", "coproc ".repeat(40));
        assert_eq!(check(&coprocs), Err(BoundsError::TooDeep { max: 32 }));
        assert_eq!(
            check(&"a".repeat(64 * 1024 + 1)),
            Err(BoundsError::TooLong { max: 64 * 1024 })
        );
        assert_eq!(check(&"a".repeat(64 * 1024)), Ok(()));
    }

    #[test]
    fn ordinary_commands_pass() {
        let rows = [
            "ls -la",
            "cd src && cargo test 2>&1 | tail -20",
            "for f in *.rs; do wc -l \"$f\"; done",
            "if [ -f x ]; then echo yes; else echo no; fi",
            "case $x in a) echo a;; (b) echo b;; esac",
            "echo \"$(git rev-parse HEAD)\" $((1 + (2 * 3)))",
            "python3 -c 'print((1+2)*(3+(4)))'",
            "cat > f.py <<'EOF'\nif x:\n    for y in z:\n        print((((y))))\nEOF\n",
            "f() { echo hi; }; f",
            "ls @(a|b) !(c) +(d)",
            "echo ${HOME:-/root} $[1+2] `date`",
            "[[ -n $x && ( $y == z ) ]] && echo ok",
            "echo if for while case { # a comment ((((( 'unbalanced",
        ];
        for command in rows {
            assert_eq!(check(command), Ok(()), "{command:?}");
        }
    }

    /// Each row: a construct nested to exactly the small limit passes, one more level fails
    /// with the expected error.
    #[test]
    fn every_nesting_construct_counts() {
        let depth = BoundsError::TooDeep { max: 4 };
        let parens = BoundsError::TooManyParens { max: 3 };
        type Row = (&'static str, &'static str, &'static str, usize, BoundsError);
        let rows: &[Row] = &[
            ("{ ", "true; ", "}; ", 4, depth.clone()),
            ("if a; then ", "b; ", "fi; ", 4, depth.clone()),
            ("while a; do ", "b; ", "done; ", 4, depth.clone()),
            ("until a; do ", "b; ", "done; ", 4, depth.clone()),
            ("for x in a; do ", "b; ", "done; ", 4, depth.clone()),
            ("select x in a; do ", "b; ", "done; ", 4, depth.clone()),
            ("case x in x) ", "b;; ", "esac;; ", 3, parens.clone()),
            ("[[ ", "a", " ]]", 4, depth.clone()),
            ("\"${a:-", "x", "}\"", 2, depth.clone()),
            ("${a:-", "x", "}", 3, parens.clone()),
            ("(", "true", ")", 3, parens.clone()),
            ("$(", "true", ")", 3, parens.clone()),
            ("\"$(", "true", ")\"", 2, depth.clone()),
            ("$[", "1", "]", 3, parens.clone()),
            ("((", "1", "))", 1, parens.clone()),
            ("@(", "a", ")", 3, parens.clone()),
        ];
        for (open, middle, close, ok, err) in rows {
            let fits = deep(open, middle, close, *ok);
            assert_eq!(check_with(&fits, &SMALL), Ok(()), "{fits:?}");
            let over = deep(open, middle, close, ok + 1);
            assert_eq!(check_with(&over, &SMALL), Err(err.clone()), "{over:?}");
        }
    }

    #[test]
    fn test_expression_operators_count() {
        assert_eq!(check_with("[[ a && b && c ]]", &SMALL), Ok(()));
        assert_eq!(
            check_with("[[ a && b || c && d || e ]]", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        assert_eq!(
            check_with("[[ ! ! ! ! a ]]", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        // Outside [[ ]], && chains are flat lists.
        assert_eq!(check_with("a && b && c && d && e && f", &SMALL), Ok(()));
    }

    #[test]
    fn unclosed_parentheses_count() {
        assert_eq!(check_with("(((1", &SMALL), Ok(()));
        assert_eq!(
            check_with("((((1", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        assert_eq!(
            check_with("echo $((((1", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        // Closed groups in a row do not add up.
        assert_eq!(check_with("(a) (b) (c) (d) (e) (f)", &SMALL), Ok(()));
    }

    #[test]
    fn quoted_and_commented_closers_do_not_close() {
        let rows = [
            "( ')' ( ')' ( ')' ( ')' x",
            "( \")\" ( \")\" ( \")\" ( \")\" x",
            "( \\) ( \\) ( \\) ( \\) x",
            "( # )\n( # )\n( # )\n( # )\nx",
            "{ echo }; { echo }; { echo }; { echo }; { echo };",
            "if a; then echo fi; if a; then echo fi; if a; then echo fi; if a; then echo fi; if",
            "( $'\\')' ( $'\\')' ( $'\\')' ( $'\\')' x",
            "{ cat <<E; {\n}\n}\n}\nE\n{ { {",
            // The tokenizer ends $( at a case pattern's `)`: the double quote closes there.
            "\"$(case x in a) \" ( ( ( ( x",
            "\"${a:-( }\" ( ( ( ( x",
            "\"$[ ( ]\" ( ( ( ( x",
        ];
        for command in rows {
            assert!(check_with(command, &SMALL).is_err(), "{command:?}");
        }
    }

    #[test]
    fn quoted_openers_do_not_open() {
        let rows = [
            "echo '((((((((((' \"{{{{{{\" \\(\\(\\(\\(\\(",
            "echo $'\\'(((((((('",
            "cat <<'EOF'\n$(((((((((\n{ { { { { {\nEOF\n",
            "echo `((((((((`",
            "# ((((((((((( { { { { { { {",
        ];
        for command in rows {
            assert_eq!(check_with(command, &SMALL), Ok(()), "{command:?}");
        }
    }

    #[test]
    fn here_documents_need_a_delimiter() {
        // Each of these made brush-parser loop, allocating, until the process ran out of
        // memory (found by the fuzz target, tests/fuzz/corpus/heredoc-no-delimiter.sh).
        for bad in [
            "echo $(\n( j?;9 x0$-<[''<< && git)",
            "$(\n(x << && y)",
            "$(\n(x <<- && y)",
            "$(\n(x <<'' && y)",
            "$(\n(x <<\"\" && y)",
            "$(\n(x << )",
            "x << && y",
            "x <<\nEOF\n",
            "x <<",
        ] {
            assert_eq!(
                check(bad),
                Err(BoundsError::HereDocWithoutDelimiter),
                "{bad:?}"
            );
        }
        for good in [
            "cat <<EOF\nhi\nEOF\n",
            "cat <<-'E'\n\thi\n\tE\n",
            "cat <<\\E\nhi\nE\n",
            "cat <<<word",
            "(( 1 << 2 ))",
            "echo $(( 1 << 2 ))",
        ] {
            assert_eq!(check(good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn expanding_heredoc_bodies_are_measured() {
        let body = "cat <<EOF\n$($($($(x))))\nEOF\n";
        assert_eq!(
            check_with(body, &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        assert_eq!(check_with("cat <<EOF\n$($(x))\nEOF\n", &SMALL), Ok(()));
        // In a substitution, even a quoted-delimiter body counts as code.
        assert_eq!(
            check_with("echo $(cat <<'E'\n((((\nE\n)", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
        assert_eq!(check_with("cat <<'E'\n((((\nE\n", &SMALL), Ok(()));
        // Inside (( )), << is a shift: what follows is code.
        assert_eq!(
            check_with("(( 1 << 2 ))\n((((x", &SMALL),
            Err(BoundsError::TooManyParens { max: 3 })
        );
    }

    #[test]
    fn quotes_in_comments_inside_substitutions_are_refused() {
        for command in [
            "echo $(ls  # it's here\n)",
            "echo $(ls  # (see docs)\n)",
            "cat <<E\n$(ls # a \"b\"\n)\nE\n",
        ] {
            assert_eq!(
                check(command),
                Err(BoundsError::QuotedComment),
                "{command:?}"
            );
        }
        assert_eq!(check("echo $(ls # plain\n)"), Ok(()));
        assert_eq!(check("ls # it's fine out here"), Ok(()));
    }
}
