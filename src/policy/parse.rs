//! From brush-parser's AST to the engine's IR.
//!
//! Every match over the AST is exhaustive, so a brush-parser upgrade that adds a construct
//! fails to compile here instead of slipping through as an allow. Constructs the IR does not
//! model become segments carrying a miss reason.

use brush_parser::ast::{
    AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, PipelineTimed, Program, SeparatorOperator,
    SimpleCommand, Word,
};
use brush_parser::Parser;

use super::bounds;
use super::ir::{Joiner, Redirect, Script, Segment, TimeKeyword};
use super::word::{literal, parser_options};

/// Parses a command line with the bash grammar, or says why it does not parse. Every parse
/// goes through here, so every text the parser sees has passed the bounds first
/// (docs/security.md, "Command parsing bounds").
pub(crate) fn parse_program(command: &str) -> Result<Program, String> {
    #[cfg(test)]
    counted::note(command);
    if command.contains('\0') {
        return Err("NUL character".to_owned());
    }
    bounds::check(command).map_err(|e| e.to_string())?;
    // A panic inside the parser is a parse failure, not a crash of the caller.
    let parsed = std::panic::catch_unwind(|| {
        let mut parser = Parser::new(std::io::Cursor::new(command.as_bytes()), &parser_options());
        parser
            .parse_program()
            .map_err(|err| format!("parse error: {err}"))
    });
    parsed.unwrap_or_else(|_| Err("parse error: the parser failed".to_owned()))
}

/// How many times a watched text was parsed, for the unit tests that hold an exec to one parse
/// (src/tools/exec_tool/tests.rs). Only texts a test asked to watch are counted, so the
/// property tests' thousands of parses keep nothing; keyed by the text, so tests running side
/// by side in one process do not count each other's parses.
#[cfg(test)]
pub(crate) mod counted {
    use std::collections::HashMap;
    use std::sync::Mutex;

    static PARSES: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

    /// Starts counting the parses of `command`, from zero.
    pub(crate) fn watch(command: &str) {
        let mut parses = PARSES.lock().unwrap();
        parses
            .get_or_insert_with(HashMap::new)
            .insert(command.to_owned(), 0);
    }

    pub(crate) fn note(command: &str) {
        let mut parses = PARSES.lock().unwrap();
        if let Some(n) = parses.as_mut().and_then(|p| p.get_mut(command)) {
            *n += 1;
        }
    }

    /// How many times `command` was parsed since [`watch`].
    pub(crate) fn of(command: &str) -> usize {
        let parses = PARSES.lock().unwrap();
        parses
            .as_ref()
            .and_then(|p| p.get(command))
            .copied()
            .unwrap_or(0)
    }
}

/// Parses a command line into the IR. Never fails: problems become misses.
pub fn parse_script(command: &str) -> Script {
    script_from(command, &parse_program(command))
}

/// The IR of `command` from its parse (done once by the caller and shared).
pub(crate) fn script_from(command: &str, parsed: &Result<Program, String>) -> Script {
    if command.trim().is_empty() {
        return Script::failed("empty command");
    }
    let program = match parsed {
        Ok(program) => program,
        Err(reason) => return Script::failed(reason.clone()),
    };
    let source: Vec<char> = command.chars().collect();
    let mut segments: Vec<Segment> = Vec::new();
    for complete in &program.complete_commands {
        for item in &complete.0 {
            if let Some(last) = segments.last_mut() {
                last.joiner = Some(Joiner::Seq);
            }
            let start = segments.len();
            let and_or = &item.0;
            push_pipeline(&mut segments, &and_or.first, &source);
            for next in &and_or.additional {
                let (joiner, pipeline) = match next {
                    AndOr::And(pipeline) => (Joiner::And, pipeline),
                    AndOr::Or(pipeline) => (Joiner::Or, pipeline),
                };
                if let Some(last) = segments.last_mut() {
                    last.joiner = Some(joiner);
                }
                push_pipeline(&mut segments, pipeline, &source);
            }
            match item.1 {
                SeparatorOperator::Sequence => {}
                SeparatorOperator::Async => {
                    for segment in &mut segments[start..] {
                        segment.note_miss("background &");
                    }
                }
            }
        }
    }
    if segments.is_empty() {
        return Script::failed("empty command");
    }
    Script {
        segments,
        miss: None,
    }
}

/// Appends the commands of one pipeline, joined by `|`.
fn push_pipeline(segments: &mut Vec<Segment>, pipeline: &Pipeline, source: &[char]) {
    let start = segments.len();
    for (position, command) in pipeline.seq.iter().enumerate() {
        if position > 0 {
            if let Some(last) = segments.last_mut() {
                last.joiner = Some(Joiner::Pipe);
            }
        }
        segments.push(command_segment(command, source));
    }
    let added = &mut segments[start..];
    if pipeline.bang {
        for segment in added.iter_mut() {
            segment.note_miss("pipeline negation !");
        }
    }
    if let Some(timed) = &pipeline.timed {
        let keyword = match timed {
            PipelineTimed::Timed(_) => TimeKeyword::Plain,
            PipelineTimed::TimedWithPosixOutput(_) => TimeKeyword::Posix,
        };
        if let [only] = added {
            only.time_keyword = Some(keyword);
        } else {
            for segment in added.iter_mut() {
                segment.note_miss("time keyword over a pipeline");
            }
        }
    }
}

/// The segment for one command of a pipeline.
fn command_segment(command: &Command, source: &[char]) -> Segment {
    let raw = match command {
        Command::Simple(simple) => source_text(simple, source),
        Command::Compound(_, _) | Command::Function(_) | Command::ExtendedTest(_, _) => None,
    }
    .unwrap_or_else(|| command.to_string());
    match command {
        Command::Simple(simple) => simple_segment(simple, raw, source),
        Command::Compound(compound, _) => Segment::unmodelled(raw, compound_name(compound)),
        Command::Function(_) => Segment::unmodelled(raw, "function definition"),
        Command::ExtendedTest(_, _) => Segment::unmodelled(raw, "[[ … ]] test"),
    }
}

/// The text of a simple command as written, for reports: from its first to its last located
/// word, widened to the redirection operators right before the first one. Here-document bodies
/// are not included.
fn source_text(simple: &SimpleCommand, chars: &[char]) -> Option<String> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let add = |spans: &mut Vec<(usize, usize)>, word: &Word| {
        if let Some(loc) = &word.loc {
            spans.push((loc.start.index, loc.end.index));
        }
    };
    let items = simple.prefix.iter().flat_map(|p| p.0.iter());
    let items = items.chain(simple.suffix.iter().flat_map(|s| s.0.iter()));
    for item in items {
        match item {
            CommandPrefixOrSuffixItem::Word(word)
            | CommandPrefixOrSuffixItem::AssignmentWord(_, word) => add(&mut spans, word),
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => match redirect {
                IoRedirect::File(_, _, IoFileRedirectTarget::Filename(word))
                | IoRedirect::File(_, _, IoFileRedirectTarget::Duplicate(word))
                | IoRedirect::HereString(_, word)
                | IoRedirect::OutputAndError(word, _) => add(&mut spans, word),
                IoRedirect::HereDocument(_, heredoc) => add(&mut spans, &heredoc.here_end),
                IoRedirect::File(_, _, IoFileRedirectTarget::Fd(_))
                | IoRedirect::File(_, _, IoFileRedirectTarget::ProcessSubstitution(_, _)) => {}
            },
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                spans.push((subshell.loc.start.index, subshell.loc.end.index));
            }
        }
    }
    if let Some(word) = &simple.word_or_name {
        add(&mut spans, word);
    }
    let start = spans.iter().map(|s| s.0).min()?;
    let end = spans.iter().map(|s| s.1).max()?;
    if start >= end || end > chars.len() {
        return None;
    }
    let mut start = start;
    while start > 0 && matches!(chars[start - 1], '<' | '>' | '&' | '0'..='9') {
        start -= 1;
    }
    let text: String = chars[start..end].iter().collect();
    Some(text.trim().to_owned())
}

/// What to call a compound command in a miss reason.
pub(crate) fn compound_name(compound: &CompoundCommand) -> &'static str {
    match compound {
        CompoundCommand::Arithmetic(_) => "arithmetic command (( … ))",
        CompoundCommand::ArithmeticForClause(_) => "for (( … )) loop",
        CompoundCommand::BraceGroup(_) => "brace group { … }",
        CompoundCommand::Subshell(_) => "subshell ( … )",
        CompoundCommand::ForClause(_) => "for loop",
        CompoundCommand::CaseClause(_) => "case statement",
        CompoundCommand::IfClause(_) => "if statement",
        CompoundCommand::WhileClause(_) => "while loop",
        CompoundCommand::UntilClause(_) => "until loop",
        CompoundCommand::Coprocess(_) => "coprocess",
    }
}

/// The segment for a simple command: literal words plus modelled redirections.
fn simple_segment(simple: &SimpleCommand, raw: String, source: &[char]) -> Segment {
    let mut segment = Segment {
        raw,
        argv: Vec::new(),
        redirects: Vec::new(),
        time_keyword: None,
        joiner: None,
        miss: None,
    };
    let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
    let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
    for item in prefix {
        if let CommandPrefixOrSuffixItem::AssignmentWord(_, _) = item {
            segment.note_miss("variable assignment prefix");
            continue;
        }
        push_item(&mut segment, item, source);
    }
    if let Some(word) = &simple.word_or_name {
        push_word(&mut segment, &word.value);
    }
    for item in suffix {
        push_item(&mut segment, item, source);
    }
    if segment.argv.is_empty() && segment.miss.is_none() {
        segment.note_miss("no command word");
    }
    let heredocs = segment
        .redirects
        .iter()
        .filter(|r| matches!(r, Redirect::HereDoc { .. }))
        .count();
    if heredocs > 1 {
        segment.note_miss("more than one here-document");
    }
    segment
}

/// Adds one prefix or suffix item to a segment.
fn push_item(segment: &mut Segment, item: &CommandPrefixOrSuffixItem, source: &[char]) {
    match item {
        CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
            if !descriptor_is_attached(redirect, source) {
                segment.note_miss("descriptor number apart from its redirection");
                return;
            }
            match model_redirect(redirect) {
                Ok(redirect) => segment.redirects.push(redirect),
                Err(reason) => segment.note_miss(reason),
            }
        }
        CommandPrefixOrSuffixItem::Word(word) => push_word(segment, &word.value),
        // After the command word an assignment-looking word is an ordinary argument
        // (`make CC=gcc`); in the prefix the caller has already refused it.
        CommandPrefixOrSuffixItem::AssignmentWord(_, word) => push_word(segment, &word.value),
        CommandPrefixOrSuffixItem::ProcessSubstitution(_, _) => {
            segment.note_miss("process substitution");
        }
    }
}

/// Adds one word to a segment's argv, or records why it has no literal value.
fn push_word(segment: &mut Segment, raw: &str) {
    match literal(raw) {
        Ok(value) => segment.argv.push(value),
        Err(reason) => {
            segment.argv.push(raw.to_owned());
            segment.note_miss(reason);
        }
    }
}

/// Whether an explicit descriptor number sits right against its operator, as the shell
/// requires (`2>x`). After a pending here-document on the same line, brush-parser 0.4.0 also
/// reads `cmd 2 >x` as `cmd 2>x`, while the shell sees the argument `2`; such a segment is a
/// miss so that the checked argv never loses a word.
fn descriptor_is_attached(redirect: &IoRedirect, source: &[char]) -> bool {
    let target = match redirect {
        IoRedirect::File(Some(_), _, IoFileRedirectTarget::Filename(word))
        | IoRedirect::File(Some(_), _, IoFileRedirectTarget::Duplicate(word))
        | IoRedirect::HereString(Some(_), word) => word,
        IoRedirect::HereDocument(Some(_), heredoc) => &heredoc.here_end,
        IoRedirect::File(_, _, _)
        | IoRedirect::HereDocument(None, _)
        | IoRedirect::HereString(None, _)
        | IoRedirect::OutputAndError(_, _) => return true,
    };
    let Some(loc) = &target.loc else { return true };
    let mut at = loc.start.index;
    if at > source.len() {
        return false;
    }
    while at > 0 && matches!(source[at - 1], ' ' | '\t') {
        at -= 1;
    }
    let mut operator = false;
    while at > 0 && matches!(source[at - 1], '<' | '>' | '&' | '|' | '-') {
        at -= 1;
        operator = true;
    }
    operator && at > 0 && source[at - 1].is_ascii_digit()
}

/// Maps a redirection onto the few the model allows.
fn model_redirect(redirect: &IoRedirect) -> Result<Redirect, String> {
    match redirect {
        IoRedirect::File(fd, kind, target) => {
            model_file_redirect(*fd, kind, target).ok_or_else(|| format!("redirection {redirect}"))
        }
        IoRedirect::HereDocument(fd, heredoc) => {
            if !matches!(fd, None | Some(0)) {
                return Err("here-document on a descriptor other than stdin".to_owned());
            }
            let raw = &heredoc.doc.value;
            let body = if heredoc.requires_expansion {
                literal_heredoc_body(raw)
                    .ok_or_else(|| "here-document with expansion".to_owned())?
            } else {
                raw.clone()
            };
            if !body.is_empty() && !body.ends_with('\n') {
                return Err("here-document body without a final newline".to_owned());
            }
            Ok(Redirect::HereDoc { body })
        }
        IoRedirect::HereString(_, _) => Err("here-string <<<".to_owned()),
        IoRedirect::OutputAndError(_, _) => Err(format!("redirection {redirect}")),
    }
}

/// What an unquoted here-document's body reads as, when it expands nothing: there a
/// backslash quotes `$`, `` ` ``, `\` and a newline (which it removes), as inside double
/// quotes, and stays itself before anything else. `None` when an unescaped `$` or `` ` ``
/// would expand.
fn literal_heredoc_body(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '$' | '`' => return None,
            '\\' => match chars.next() {
                Some(n @ ('$' | '`' | '\\')) => out.push(n),
                Some('\n') => {}
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// The modelled form of a file redirection, if it is one of the harmless ones.
fn model_file_redirect(
    fd: Option<i32>,
    kind: &IoFileRedirectKind,
    target: &IoFileRedirectTarget,
) -> Option<Redirect> {
    let target_is = |expected: &str| match target {
        IoFileRedirectTarget::Filename(word) | IoFileRedirectTarget::Duplicate(word) => {
            literal(&word.value).is_ok_and(|value| value == expected)
        }
        IoFileRedirectTarget::Fd(number) => number.to_string() == expected,
        IoFileRedirectTarget::ProcessSubstitution(_, _) => false,
    };
    match (fd, kind) {
        (Some(2), IoFileRedirectKind::DuplicateOutput) if target_is("1") => {
            Some(Redirect::StderrToStdout)
        }
        (None | Some(1), IoFileRedirectKind::Write) if target_is("/dev/null") => {
            Some(Redirect::StdoutToNull)
        }
        (Some(2), IoFileRedirectKind::Write) if target_is("/dev/null") => {
            Some(Redirect::StderrToNull)
        }
        (
            _,
            IoFileRedirectKind::Read
            | IoFileRedirectKind::Write
            | IoFileRedirectKind::Append
            | IoFileRedirectKind::ReadAndWrite
            | IoFileRedirectKind::Clobber
            | IoFileRedirectKind::DuplicateInput
            | IoFileRedirectKind::DuplicateOutput,
        ) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argvs(command: &str) -> Vec<Vec<String>> {
        let script = parse_script(command);
        assert_eq!(script.first_miss(), None, "command {command:?}");
        script.segments.into_iter().map(|s| s.argv).collect()
    }

    fn joiners(command: &str) -> Vec<Option<&'static str>> {
        parse_script(command)
            .segments
            .iter()
            .map(|s| s.joiner.map(Joiner::as_str))
            .collect()
    }

    #[test]
    fn modelled_commands() {
        let rows: &[(&str, &[&[&str]])] = &[
            ("ls", &[&["ls"]]),
            ("ls -la", &[&["ls", "-la"]]),
            ("  ls   -la  ", &[&["ls", "-la"]]),
            ("git status", &[&["git", "status"]]),
            ("grep foo | head -5", &[&["grep", "foo"], &["head", "-5"]]),
            ("sort -r | uniq -c", &[&["sort", "-r"], &["uniq", "-c"]]),
            ("a && b || c ; d", &[&["a"], &["b"], &["c"], &["d"]]),
            ("a\nb", &[&["a"], &["b"]]),
            ("a;b;", &[&["a"], &["b"]]),
            ("ls # comment", &[&["ls"]]),
            ("'t''ouch' x", &[&["touch", "x"]]),
            ("'l''s'", &[&["ls"]]),
            ("echo 'a b' \"c d\"", &[&["echo", "a b", "c d"]]),
            ("make CC=gcc", &[&["make", "CC=gcc"]]),
            ("ls \\\n-la", &[&["ls", "-la"]]),
            ("cut -d, -f1", &[&["cut", "-d,", "-f1"]]),
            ("tr a-z A-Z", &[&["tr", "a-z", "A-Z"]]),
            ("echo ''", &[&["echo", ""]]),
        ];
        for (command, want) in rows {
            let want: Vec<Vec<String>> = want
                .iter()
                .map(|argv| argv.iter().map(|s| (*s).to_owned()).collect())
                .collect();
            assert_eq!(argvs(command), want, "command {command:?}");
        }
    }

    #[test]
    fn joiners_are_preserved() {
        assert_eq!(
            joiners("a | b && c || d ; e"),
            vec![Some("|"), Some("&&"), Some("||"), Some(";"), None]
        );
        assert_eq!(joiners("a\nb | c"), vec![Some(";"), Some("|"), None]);
        assert_eq!(joiners("a;"), vec![None]);
    }

    #[test]
    fn modelled_redirects() {
        let rows: &[(&str, &[Redirect])] = &[
            ("make test 2>&1", &[Redirect::StderrToStdout]),
            ("ls >/dev/null", &[Redirect::StdoutToNull]),
            ("ls 1>/dev/null", &[Redirect::StdoutToNull]),
            ("ls > /dev/null", &[Redirect::StdoutToNull]),
            ("ls 2>/dev/null", &[Redirect::StderrToNull]),
            ("ls >'/dev/null'", &[Redirect::StdoutToNull]),
            (
                "ls >/dev/null 2>&1",
                &[Redirect::StdoutToNull, Redirect::StderrToStdout],
            ),
            (
                "ls 2>&1 >/dev/null",
                &[Redirect::StderrToStdout, Redirect::StdoutToNull],
            ),
            ("2>&1 ls", &[Redirect::StderrToStdout]),
        ];
        for (command, want) in rows {
            let script = parse_script(command);
            assert_eq!(script.first_miss(), None, "command {command:?}");
            assert_eq!(script.segments[0].redirects, *want, "command {command:?}");
        }
        let script = parse_script("a |& b");
        assert_eq!(script.first_miss(), None);
        assert_eq!(script.segments[0].redirects, vec![Redirect::StderrToStdout]);
    }

    #[test]
    fn heredocs() {
        let script = parse_script("cat <<'EOF' | wc -l\nhello $x `id`\nEOF\n");
        assert_eq!(script.first_miss(), None);
        assert_eq!(
            script.segments[0].redirects,
            vec![Redirect::HereDoc {
                body: "hello $x `id`\n".to_owned()
            }]
        );
        let script = parse_script("cat <<\"EOF\"\n$(id)\nEOF");
        assert_eq!(script.first_miss(), None);
        let script = parse_script("cat <<EOF\nplain text\nEOF");
        assert_eq!(script.first_miss(), None);
        assert_eq!(
            script.segments[0].redirects,
            vec![Redirect::HereDoc {
                body: "plain text\n".to_owned()
            }]
        );
        // In an unquoted here-document, escaped `$`, `` ` `` and `\` are literal text.
        for (text, body) in [
            ("cat <<EOF\necho \\$(id) \\`id\\`\nEOF", "echo $(id) `id`\n"),
            ("cat <<EOF\na\\$b c\\\\d \\x\nEOF", "a$b c\\d \\x\n"),
            ("cat <<EOF\njoined \\\nline\nEOF", "joined line\n"),
        ] {
            let script = parse_script(text);
            assert_eq!(script.first_miss(), None, "{text:?}");
            assert_eq!(
                script.segments[0].redirects,
                vec![Redirect::HereDoc { body: body.into() }],
                "{text:?}"
            );
        }
        let script = parse_script("cat <<-'EOF'\n\tindented\n\tEOF\n");
        assert_eq!(script.first_miss(), None);
        assert_eq!(
            script.segments[0].redirects,
            vec![Redirect::HereDoc {
                body: "indented\n".to_owned()
            }]
        );
    }

    #[test]
    fn unmodelled_constructs_are_misses() {
        let rows: &[(&str, &str)] = &[
            ("", "empty command"),
            ("   ", "empty command"),
            ("# only a comment", "empty command"),
            ("echo $(id)", "command substitution"),
            ("echo `id`", "command substitution"),
            (
                "echo \"$(id)\"",
                "command substitution inside double quotes",
            ),
            (
                "echo \"$(\\\nid)\"",
                "command substitution inside double quotes",
            ),
            ("echo \"`id`\"", "command substitution inside double quotes"),
            ("diff <(ls a) <(ls b)", "process substitution"),
            ("ls > >(cat)", "redirection"),
            ("(ls)", "subshell ( … )"),
            ("{ ls; }", "brace group { … }"),
            ("f() { ls; }", "function definition"),
            ("function f { ls; }", "function definition"),
            ("if true; then ls; fi", "if statement"),
            ("for x in a; do ls; done", "for loop"),
            ("while true; do ls; done", "while loop"),
            ("until false; do ls; done", "until loop"),
            ("case x in x) ls;; esac", "case statement"),
            ("(( 1 + 1 ))", "arithmetic command (( … ))"),
            ("[[ -f x ]]", "[[ … ]] test"),
            ("coproc ls", "coprocess"),
            ("cat <<EOF\n$HOME\nEOF", "here-document with expansion"),
            ("cat <<EOF\n`id`\nEOF", "here-document with expansion"),
            ("cat <<EOF\n$(id)\nEOF", "here-document with expansion"),
            ("cat <<EOF\na\\\\$b\nEOF", "here-document with expansion"),
            (
                "cat <<EOF\n\\$(id) $(id)\nEOF",
                "here-document with expansion",
            ),
            (
                "cat 3<<'EOF'\nx\nEOF",
                "here-document on a descriptor other than stdin",
            ),
            (
                "cat <<'A' <<'B'\nx\nA\ny\nB\n",
                "more than one here-document",
            ),
            ("cat <<< hi", "here-string <<<"),
            ("ls > out.txt", "redirection"),
            ("ls >> /dev/null", "redirection"),
            ("ls < in.txt", "redirection"),
            ("ls &> /dev/null", "redirection"),
            ("ls 2>&3", "redirection"),
            ("ls >&2", "redirection"),
            ("ls >/dev/nul?", "redirection"),
            ("ls &", "background &"),
            ("ls & rm x", "background &"),
            ("! ls", "pipeline negation !"),
            ("time ls | wc", "time keyword over a pipeline"),
            ("FOO=bar ls", "variable assignment prefix"),
            ("$CMD -la", "parameter expansion"),
            ("${CMD}", "parameter expansion"),
            ("l* -la", "glob pattern"),
            ("{ls,-la}", "brace expansion"),
            ("~/bin/tool", "tilde expansion"),
            ("$'ls'", "ANSI-C quoting $'…'"),
            ("ls\u{a0}-la", "non-ASCII character outside quotes"),
            ("ls;\rrm x", "carriage return outside quotes"),
            ("ls \r rm", "carriage return outside quotes"),
            (">/dev/null", "no command word"),
            ("echo \"unterminated", "parse error"),
            ("ls &&", "parse error"),
            ("a | | b", "parse error"),
            ("echo a\0b", "NUL character"),
        ];
        for (command, want) in rows {
            let script = parse_script(command);
            let miss = script.first_miss().unwrap_or("<none>");
            assert!(
                miss.starts_with(want),
                "command {command:?}: miss {miss:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn raw_text_comes_from_the_source() {
        let rows: &[(&str, &[&str])] = &[
            ("ls -la && rm -rf /", &["ls -la", "rm -rf /"]),
            (
                "nice -n 5 git status 2>&1 | grep -i foo",
                &["nice -n 5 git status 2>&1", "grep -i foo"],
            ),
            ("2>&1 make", &["2>&1 make"]),
            (">/dev/null ls", &[">/dev/null ls"]),
            (
                "cat <<'EOF' | wc -l\nhello\nEOF\n",
                &["cat <<'EOF'", "wc -l"],
            ),
            ("'t''ouch'   x", &["'t''ouch'   x"]),
            ("caf\u{e9} x; ls", &["caf\u{e9} x", "ls"]),
            ("ls \\\n-la", &["ls \\\n-la"]),
            ("diff <(ls) b", &["diff <(ls) b"]),
            ("FOO=1 ls", &["FOO=1 ls"]),
        ];
        for (command, want) in rows {
            let raws: Vec<String> = parse_script(command)
                .segments
                .into_iter()
                .map(|s| s.raw)
                .collect();
            assert_eq!(raws, *want, "command {command:?}");
        }
    }

    #[test]
    fn detached_descriptor_numbers_are_misses() {
        let rows: &[(&str, Option<&str>)] = &[
            ("ls 2 >/dev/null", None),
            ("ls 2>/dev/null", None),
            ("ls 2>&1", None),
            ("cat <<'E' | ls 2>/dev/null\nE\n", None),
            (
                "cat <<'E' | ls 2 >/dev/null\nE\n",
                Some("descriptor number apart"),
            ),
            (
                "cat <<'E' ; ls a 0 >/dev/null\nE\n",
                Some("descriptor number apart"),
            ),
            ("cat <<'E' ; ls a 2 2>&1\nE\n", None),
        ];
        for (command, want) in rows {
            let script = parse_script(command);
            let miss = script.first_miss();
            match want {
                None => assert_eq!(miss, None, "command {command:?}"),
                Some(want) => assert!(
                    miss.is_some_and(|m| m.starts_with(want)),
                    "command {command:?}: miss {miss:?}"
                ),
            }
        }
    }

    #[test]
    fn time_keyword_on_single_command() {
        let script = parse_script("time ls");
        assert_eq!(script.first_miss(), None);
        assert_eq!(script.segments[0].time_keyword, Some(TimeKeyword::Plain));
        let script = parse_script("time -p make");
        assert_eq!(script.segments[0].time_keyword, Some(TimeKeyword::Posix));
    }
}
