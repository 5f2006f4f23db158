//! The `runner` command line: parse arguments, call the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
