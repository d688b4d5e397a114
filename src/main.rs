//! The `moat` binary: parses the command line and hands off to `cli`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
