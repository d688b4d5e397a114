//! Every command a line could run, as far as its text reveals it.
//!
//! Argv patterns and the `/approve` refusal must hold in every security mode, including full
//! mode where nothing else is parsed. So this walker visits every simple command in the AST,
//! inside substitutions, subshells, compound commands, function bodies, here-documents and
//! `sh -c` / `eval` payloads, and records what it cannot see through as opaque.

use brush_parser::ast::{
    AndOrList, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectTarget, IoRedirect, Program, SimpleCommand,
};
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::parse::parse_program;
use super::paths::basename;
use super::word::{heredoc_pieces, literal, pieces};
use super::wrappers::pattern_layers;

/// How deep payloads and substitutions are followed before the rest counts as opaque.
const MAX_DEPTH: usize = 4;

/// Shells whose `-c` payload is followed.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "rbash",
];

/// What the walk found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Probes {
    /// Best-effort argv of every simple command (words without a literal value kept raw).
    pub argvs: Vec<Vec<String>>,
    /// What could not be seen through, e.g. a dynamic command word or a parse error.
    pub opaque: Vec<String>,
}

/// Collects every command `command` could run.
#[cfg(test)]
pub(crate) fn collect(command: &str) -> Probes {
    collect_from(command, &parse_program(command))
}

/// Collects every command `command` could run, from its parse (done once by the caller).
pub(crate) fn collect_from(command: &str, parsed: &Result<Program, String>) -> Probes {
    let mut walker = Walker {
        depth: 0,
        probes: Probes::default(),
    };
    if !command.trim().is_empty() {
        walker.parsed(parsed);
    }
    walker.probes
}

/// The walk's state.
struct Walker {
    /// Current payload nesting depth.
    depth: usize,
    /// Findings so far.
    probes: Probes,
}

impl Walker {
    fn opaque(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.probes.opaque.contains(&reason) {
            self.probes.opaque.push(reason);
        }
    }

    /// Parses and walks a piece of shell text one level deeper.
    fn text(&mut self, text: &str) {
        if self.depth > MAX_DEPTH {
            self.opaque("nesting too deep");
            return;
        }
        if text.trim().is_empty() {
            return;
        }
        self.parsed(&parse_program(text));
    }

    /// Walks a parsed text one level deeper.
    fn parsed(&mut self, parsed: &Result<Program, String>) {
        match parsed {
            Ok(program) => {
                self.depth += 1;
                self.program(program);
                self.depth -= 1;
            }
            Err(reason) => self.opaque(reason.clone()),
        }
    }

    fn program(&mut self, program: &Program) {
        for list in &program.complete_commands {
            self.list(list);
        }
    }

    fn list(&mut self, list: &CompoundList) {
        for item in &list.0 {
            self.and_or(&item.0);
        }
    }

    fn and_or(&mut self, and_or: &AndOrList) {
        for (_, pipeline) in and_or.iter() {
            for command in &pipeline.seq {
                self.command(command);
            }
        }
    }

    fn command(&mut self, command: &Command) {
        match command {
            Command::Simple(simple) => self.simple(simple),
            Command::Compound(compound, redirects) => {
                self.compound(compound);
                for redirect in redirects.iter().flat_map(|r| r.0.iter()) {
                    self.redirect(redirect);
                }
            }
            Command::Function(function) => {
                // A function named like an innocent command can stand for any body, and its
                // callers pass the arguments the patterns would have seen.
                self.opaque("function definition");
                self.compound(&function.body.0);
                for redirect in function.body.1.iter().flat_map(|r| r.0.iter()) {
                    self.redirect(redirect);
                }
            }
            Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr);
                for redirect in redirects.iter().flat_map(|r| r.0.iter()) {
                    self.redirect(redirect);
                }
            }
        }
    }

    fn compound(&mut self, compound: &CompoundCommand) {
        match compound {
            CompoundCommand::Arithmetic(arithmetic) => self.arithmetic(&arithmetic.expr.value),
            CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value);
                }
                self.list(&clause.body.list);
            }
            CompoundCommand::BraceGroup(group) => self.list(&group.list),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value);
                }
                self.list(&clause.body.list);
            }
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value);
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value);
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list);
                    }
                }
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition);
                self.list(&clause.then);
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition);
                    }
                    self.list(&branch.body);
                }
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0);
                self.list(&clause.1.list);
            }
            CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body),
        }
    }

    fn extended_test(&mut self, expr: &ExtendedTestExpr) {
        match expr {
            ExtendedTestExpr::And(left, right) | ExtendedTestExpr::Or(left, right) => {
                self.extended_test(left);
                self.extended_test(right);
            }
            ExtendedTestExpr::Not(inner) | ExtendedTestExpr::Parenthesized(inner) => {
                self.extended_test(inner);
            }
            ExtendedTestExpr::UnaryTest(_, operand) => self.word(&operand.value),
            ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.word(&left.value);
                self.word(&right.value);
            }
        }
    }

    fn arithmetic(&mut self, text: &str) {
        if text.contains("$(") || text.contains('`') {
            self.opaque("command substitution inside arithmetic");
        }
    }

    fn simple(&mut self, simple: &SimpleCommand) {
        let mut argv: Vec<String> = Vec::new();
        let mut dynamic_command = false;
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        for item in prefix {
            if let CommandPrefixOrSuffixItem::AssignmentWord(_, word) = item {
                if word.value.starts_with("PATH=") || word.value.starts_with("PATH+=") {
                    self.opaque("PATH assignment");
                }
                self.word(&word.value);
            } else {
                self.item(item, &mut argv, &mut dynamic_command);
            }
        }
        if let Some(word) = &simple.word_or_name {
            self.push_word(&word.value, &mut argv, &mut dynamic_command);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, &mut argv, &mut dynamic_command);
        }
        if dynamic_command {
            self.opaque("dynamic command word");
        }
        if argv.is_empty() {
            return;
        }
        // `alias x=sudo` makes a later `x id` run sudo under a name no pattern names; dash
        // expands aliases even when not interactive (docs/policy.md, "Full mode").
        let head: Vec<&str> = argv.iter().take(3).map(|w| basename(w)).collect();
        if head.contains(&"alias") && argv[1..].iter().any(|a| a.contains('=')) {
            self.opaque("alias definition");
        }
        // `hash -p /usr/bin/sudo x` makes `x` run sudo in bash.
        if head.contains(&"hash") && argv.iter().any(|a| a.starts_with("-p")) {
            self.opaque("hash -p definition");
        }
        // A changed PATH makes a bare name resolve to another program than the one checked.
        let sets_path = |w: &String| w.starts_with("PATH=") || w.starts_with("PATH+=");
        if head
            .iter()
            .any(|h| matches!(*h, "export" | "declare" | "typeset" | "readonly" | "local"))
            && argv.iter().any(sets_path)
        {
            self.opaque("PATH assignment");
        }
        for layer in pattern_layers(&argv) {
            self.payloads(&layer);
        }
        self.probes.argvs.push(argv);
    }

    fn item(
        &mut self,
        item: &CommandPrefixOrSuffixItem,
        argv: &mut Vec<String>,
        dynamic: &mut bool,
    ) {
        match item {
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect),
            CommandPrefixOrSuffixItem::Word(word)
            | CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                self.push_word(&word.value, argv, dynamic);
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                self.list(&subshell.list);
            }
        }
    }

    fn push_word(&mut self, raw: &str, argv: &mut Vec<String>, dynamic: &mut bool) {
        self.word(raw);
        match literal(raw) {
            Ok(value) => argv.push(value),
            Err(_) => {
                if argv.is_empty() {
                    *dynamic = true;
                }
                argv.push(raw.to_owned());
            }
        }
    }

    /// Follows the code a command carries in its arguments.
    fn payloads(&mut self, layer: &[String]) {
        let name = basename(&layer[0]);
        let args = &layer[1..];
        if SHELLS.contains(&name) {
            let flag_at = args.iter().position(|a| {
                a == "--command" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c'))
            });
            if let Some(at) = flag_at {
                if let Some(payload) = args[at + 1..].iter().find(|a| !a.starts_with('-')) {
                    self.text(payload);
                }
            }
        }
        match name {
            "eval" => self.text(&args.join(" ")),
            "su" | "runuser" => {
                let at = args.iter().position(|a| a == "-c" || a == "--command");
                if let Some(payload) = at.and_then(|at| args.get(at + 1)) {
                    self.text(payload);
                }
            }
            "env" => {
                for (index, arg) in args.iter().enumerate() {
                    if let Some(inline) = arg.strip_prefix("-S").filter(|s| !s.is_empty()) {
                        self.text(inline);
                    } else if let Some(inline) = arg.strip_prefix("--split-string=") {
                        self.text(inline);
                    } else if arg == "-S" || arg == "--split-string" {
                        if let Some(payload) = args.get(index + 1) {
                            self.text(payload);
                        }
                    }
                }
            }
            "source" | "." => self.opaque("sourced file"),
            _ => {}
        }
    }

    fn redirect(&mut self, redirect: &IoRedirect) {
        match redirect {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(word) | IoFileRedirectTarget::Duplicate(word) => {
                    self.word(&word.value);
                }
                IoFileRedirectTarget::Fd(_) => {}
                IoFileRedirectTarget::ProcessSubstitution(_, subshell) => self.list(&subshell.list),
            },
            IoRedirect::HereDocument(_, heredoc) => {
                if heredoc.requires_expansion {
                    match heredoc_pieces(&heredoc.doc.value) {
                        Some(pieces) => self.pieces(&heredoc.doc.value, &pieces),
                        None => self.opaque("unparsable here-document"),
                    }
                }
            }
            IoRedirect::HereString(_, word) | IoRedirect::OutputAndError(word, _) => {
                self.word(&word.value);
            }
        }
    }

    /// Follows the substitutions inside one word.
    fn word(&mut self, raw: &str) {
        if !raw.contains('$') && !raw.contains('`') && !raw.contains("<(") && !raw.contains(">(") {
            return;
        }
        match pieces(raw) {
            Some(pieces) => self.pieces(raw, &pieces),
            None => self.opaque("unparsable word"),
        }
    }

    fn pieces(&mut self, raw: &str, pieces: &[WordPieceWithSource]) {
        for piece in pieces {
            match &piece.piece {
                WordPiece::CommandSubstitution(text)
                | WordPiece::BackquotedCommandSubstitution(text) => self.text(text),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => self.pieces(raw, inner),
                WordPiece::ParameterExpansion(_) | WordPiece::ArithmeticExpression(_) => {
                    let source = raw.get(piece.start_index..piece.end_index).unwrap_or(raw);
                    if source.contains("$(") || source.contains('`') || source.contains("<(") {
                        self.opaque("command substitution inside an expansion");
                    }
                }
                WordPiece::Text(_)
                | WordPiece::SingleQuotedText(_)
                | WordPiece::AnsiCQuotedText(_)
                | WordPiece::TildeExpansion(_)
                | WordPiece::EscapeSequence(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(command: &str) -> Vec<String> {
        collect(command).argvs.iter().map(|a| a.join(" ")).collect()
    }

    #[test]
    fn finds_nested_commands() {
        let rows: &[(&str, &[&str])] = &[
            ("ls -la", &["ls -la"]),
            ("a | b && c", &["a", "b", "c"]),
            ("echo $(sudo id)", &["sudo id", "echo $(sudo id)"]),
            ("echo \"$(sudo id)\"", &["sudo id", "echo \"$(sudo id)\""]),
            ("echo `sudo id`", &["sudo id", "echo `sudo id`"]),
            ("(sudo id)", &["sudo id"]),
            ("{ sudo id; }", &["sudo id"]),
            ("if true; then sudo id; fi", &["true", "sudo id"]),
            ("for x in $(ls); do rm $x; done", &["ls", "rm $x"]),
            ("while sudo id; do :; done", &["sudo id", ":"]),
            ("case $(id) in x) rm y;; esac", &["id", "rm y"]),
            ("f() { sudo id; }", &["sudo id"]),
            ("diff <(sudo cat a) b", &["sudo cat a", "diff b"]),
            ("cat > >(sudo tee x)", &["sudo tee x", "cat"]),
            ("X=$(sudo id) ls", &["sudo id", "ls"]),
            ("cat <<EOF\n$(sudo id)\nEOF", &["sudo id", "cat"]),
            ("cat <<'EOF'\n$(sudo id)\nEOF", &["cat"]),
            ("sh -c 'sudo id'", &["sudo id", "sh -c sudo id"]),
            ("bash -lc 'rm -rf /'", &["rm -rf /", "bash -lc rm -rf /"]),
            ("eval 'sudo id'", &["sudo id", "eval sudo id"]),
            ("env -S 'sudo id'", &["sudo id", "env -S sudo id"]),
            ("nice sh -c 'sudo id'", &["sudo id", "nice sh -c sudo id"]),
            ("su -c 'rm x' root", &["rm x", "su -c rm x root"]),
            ("[[ $(sudo id) ]]", &["sudo id"]),
            ("coproc sudo id", &["sudo id"]),
            ("ls\nsudo id", &["ls", "sudo id"]),
        ];
        for (command, want) in rows {
            assert_eq!(joined(command), *want, "command {command:?}");
        }
    }

    #[test]
    fn reports_what_it_cannot_see() {
        let rows: &[(&str, &str)] = &[
            ("$CMD x", "dynamic command word"),
            ("\"$(echo sudo)\" id", "dynamic command word"),
            ("echo \"unterminated", "parse error"),
            (
                "echo ${x:-$(sudo id)}",
                "command substitution inside an expansion",
            ),
            ("(( $(id) ))", "command substitution inside arithmetic"),
            ("source ./x.sh", "sourced file"),
            ("alias x=sudo\nx id", "alias definition"),
            ("builtin alias x=sudo\nx id", "alias definition"),
            ("hash -p /usr/bin/sudo x; x id", "hash -p definition"),
            ("PATH=/workspace/bin x id", "PATH assignment"),
            ("export PATH=/workspace/bin; x id", "PATH assignment"),
            ("alias x='sudo'; x id", "alias definition"),
            ("sh -c 'alias x=sudo\nx id'", "alias definition"),
            ("s() { sudo \"$@\"; }; s id", "function definition"),
            (". ./x.sh", "sourced file"),
            (
                "sh -c \"sh -c \\\"sh -c 'sh -c \\\\\\\"sh -c id\\\\\\\"'\\\"\"",
                "nesting too deep",
            ),
        ];
        for (command, want) in rows {
            let probes = collect(command);
            assert!(
                probes.opaque.iter().any(|o| o.starts_with(want)),
                "command {command:?}: opaque {:?}, want {want:?}",
                probes.opaque
            );
        }
        assert!(collect("ls -la | wc -l").opaque.is_empty());
    }
}
