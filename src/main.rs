//! wirelog: a passive network traffic probe.
//!
//! The binary is thin: it parses flags, runs the chosen command and decides
//! the exit code. The pipeline stages live in the workspace crates
//! (source -> decode -> track -> record -> sink).

mod capture;
mod cli;
mod output;
mod progress;
mod query;
mod read;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let result = match args.command {
        cli::Command::Read(opts) => read::run(opts),
        cli::Command::Query(opts) => query::run(opts),
        cli::Command::Capture(opts) => capture::run(opts),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed stdout (e.g. piped into `head`) is not an error worth reporting.
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            eprintln!("wirelog: {err:#}");
            ExitCode::from(2)
        }
    }
}
