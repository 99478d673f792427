//! wirelog: a passive network traffic probe.
//!
//! The binary is thin: it parses flags, runs the chosen command and decides
//! the exit code. The pipeline stages live in the workspace crates
//! (source -> decode -> track -> record -> sink).

mod capture;
mod cli;
mod clickhouse;
mod config;
mod limits;
mod output;
mod pcap;
mod progress;
mod query;
mod read;
mod serve;
mod store;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let argv = match config::expand(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(err) => {
            eprintln!("wirelog: {err:#}");
            return ExitCode::from(2);
        }
    };
    let from_file = argv.len() != std::env::args_os().len();
    let args = match cli::Cli::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) if from_file && e.use_stderr() => {
            // clap names the option; say where its value may have come from.
            let _ = e.print();
            eprintln!("(options were also read from the --config file)");
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    let result = match args.command {
        cli::Command::Read(opts) => read::run(opts),
        cli::Command::Query(opts) => query::run(opts),
        cli::Command::Capture(opts) => capture::run(opts),
        cli::Command::Serve(opts) => serve::run(opts),
        cli::Command::Store(opts) => store::run(opts),
        cli::Command::Clickhouse(cmd) => clickhouse::run(cmd),
        cli::Command::Pcap(opts) => pcap::run(opts),
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
