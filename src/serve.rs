//! `wirelog serve`: the web UI, the API and the metrics over a store, until killed.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use wirelog_serve::{Limits, Options};

use crate::cli::ServeArgs;

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let token = args.token.token()?;
    wirelog_serve::check_listen(&args.listen, token.as_deref(), "--listen").map_err(|e| anyhow!(e))?;
    crate::limits::duration_in_range(
        "--query-timeout",
        args.query_timeout,
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(3600),
    )?;
    crate::limits::in_range("--max-rows", args.max_rows as u64, 1, 1_000_000)?;
    if !args.store.is_dir() {
        bail!(
            "{}: no store here (write one with `wirelog read --store {}`)",
            args.store.display(),
            args.store.display()
        );
    }
    let server = wirelog_serve::start(Options {
        listen: args.listen,
        store: Some(args.store.clone()),
        token,
        api: true,
        live: None,
        limits: Limits {
            max_rows: args.max_rows,
            timeout: args.query_timeout,
            ..Limits::default()
        },
    })
    .map_err(|e| anyhow!(e))?;
    eprintln!(
        "wirelog: serving {} on http://{}/ (API under /api/, metrics at /metrics)",
        args.store.display(),
        server.addr()
    );
    server.join().map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}
