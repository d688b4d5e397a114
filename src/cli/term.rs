//! The only way the CLI writes to the operator's terminal. Anything it prints may carry text an
//! agent chose (commands, output, event texts, error messages naming a value), so every line
//! goes through `moat::output::escape_terminal`, and JSON through `escape_json_text`, which
//! keeps it valid and equal in value (docs/security.md, "Operator-facing text").
//! `tests/cli_terminal.rs` checks that no other file in src/cli prints directly.

use std::io::Write;

use moat::output::{escape_json_text, escape_terminal};

/// `println!` for the operator: the formatted text is escaped first.
macro_rules! say {
    () => {
        $crate::cli::term::line("")
    };
    ($($arg:tt)*) => {
        $crate::cli::term::line(&format!($($arg)*))
    };
}

/// `eprintln!` for the operator.
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::cli::term::err_line(&format!($($arg)*))
    };
}

/// `print!` for the operator (no line break added).
macro_rules! say_part {
    ($($arg:tt)*) => {
        $crate::cli::term::part(&format!($($arg)*))
    };
}

pub(crate) use {say, say_err, say_part};

/// The exit status of a CLI whose reader went away (`moat … | head`): what a shell reports for
/// a program ended by SIGPIPE (128 + 13), which Rust programs ignore.
const CLOSED_PIPE_STATUS: i32 = 141;

/// Writes `text` to stdout. A reader that closed the pipe ends the CLI quietly, as SIGPIPE
/// ends other programs, instead of a panic; any other failure to write is as final.
fn out(text: &str, flush: bool) {
    let mut stdout = std::io::stdout().lock();
    let written =
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| if flush { stdout.flush() } else { Ok(()) });
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(CLOSED_PIPE_STATUS);
        }
        // moat's own failure, as for any error (README, "Exit codes of `moat exec`").
        std::process::exit(2);
    }
}

/// Writes `text` to stderr; a stderr nobody reads is no reason to stop.
fn err(text: &str, flush: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    if flush {
        let _ = stderr.flush();
    }
}

pub fn line(text: &str) {
    out(&format!("{}\n", escape_terminal(text)), false);
}

pub fn err_line(text: &str) {
    err(&format!("{}\n", escape_terminal(text)), false);
}

pub fn part(text: &str) {
    out(&escape_terminal(text), true);
}

/// `part` for stderr: a run's stderr text as it arrives.
pub fn err_part(text: &str) {
    err(&escape_terminal(text), true);
}

/// The one raw path to the terminal: `moat shell`'s interactive terminal stream, which must
/// reach the operator's terminal byte for byte (escape sequences are how a shell draws), as
/// `docker exec -it` passes it. The operator asked for a terminal into the sandbox; nothing
/// else goes this way (docs/security.md, "Operator-facing text").
pub fn terminal_bytes(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Prints a value as one line of JSON.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    out(
        &format!("{}\n", escape_json_text(&serde_json::to_string(value)?)),
        false,
    );
    Ok(())
}

/// Prints a value as indented JSON.
pub fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    out(
        &format!(
            "{}\n",
            escape_json_text(&serde_json::to_string_pretty(value)?)
        ),
        false,
    );
    Ok(())
}

/// Prints an already serialized JSON text (e.g. an event's `data`) with the JSON escaping:
/// for text that is not JSON it is still a terminal-safe rendering.
pub fn json_text(text: &str) {
    println!("{}", escape_json_text(text));
}

/// Log lines (`MOAT_LOG`) to stderr, escaped like everything else: a log message can quote an
/// engine error or a value an agent chose.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = escape_terminal(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
