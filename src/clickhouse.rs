//! `wirelog clickhouse init|flush`, and the ClickHouse options of `read`
//! and `capture` turned into the sink's configuration.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use wirelog_clickhouse::{run_sql, schema, ClickHouseSink, Config, Layout, Server, Table, SCHEMA_VERSION};

use crate::cli::{ClickhouseCommand, ClickhouseInitArgs, ClickhouseServerArgs, OutputArgs};

/// Deduplication tokens the tables remember (per table): far more than the
/// batches one probe retries at once, and cheap for the server.
const DEDUP_WINDOW: u32 = 10_000;

/// The password: from --clickhouse-password-file, else the environment.
fn password(args: &ClickhouseServerArgs) -> Result<Option<String>> {
    if let Some(f) = &args.clickhouse_password_file {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("--clickhouse-password-file {}: cannot read", f.display()))?;
        return Ok(Some(text.lines().next().unwrap_or("").to_string()));
    }
    Ok(std::env::var("WIRELOG_CLICKHOUSE_PASSWORD").ok())
}

/// The server the options name; `None` without --clickhouse.
pub fn server(args: &ClickhouseServerArgs) -> Result<Option<Server>> {
    let Some(url) = &args.url else {
        return Ok(None);
    };
    crate::limits::duration_in_range(
        "--clickhouse-timeout",
        args.clickhouse_timeout,
        Duration::from_millis(100),
        Duration::from_secs(3600),
    )?;
    let s = Server {
        url: url.trim_end_matches('/').to_string(),
        user: args.clickhouse_user.clone(),
        password: password(args)?,
        database: args.clickhouse_database.clone(),
        timeout: args.clickhouse_timeout,
    };
    s.check().map_err(|e| anyhow!(e))?;
    Ok(Some(s))
}

/// The host name, the default probe name.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wirelog".to_string())
}

/// The sink's configuration from `read`/`capture` options; `iface` names
/// what the rows come from (interfaces, or capture files).
pub fn sink_config(out: &OutputArgs, iface: &str) -> Result<Option<Config>> {
    let a = &out.clickhouse;
    let Some(server) = server(&a.server)? else {
        return Ok(None);
    };
    let probe = a.probe_name.clone().unwrap_or_else(host_name);
    if probe.is_empty() || probe.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("--probe-name {probe:?}: a name without spaces is needed (it tags every row)");
    }
    crate::limits::size_in_range("--spool-size", a.spool_size, 1 << 20, 1 << 50)?;
    crate::limits::in_range("--clickhouse-batch-rows", a.clickhouse_batch_rows, 1, 100_000_000)?;
    crate::limits::size_in_range("--clickhouse-batch-bytes", a.clickhouse_batch_bytes, 4096, 1 << 30)?;
    crate::limits::duration_in_range(
        "--clickhouse-batch-age",
        a.clickhouse_batch_age,
        Duration::from_millis(100),
        Duration::from_secs(3600),
    )?;
    let spool_dir = a.spool_dir.clone().unwrap_or_else(|| {
        if !out.no_store {
            out.store.join("clickhouse-spool")
        } else if let Some(l) = &out.logs {
            l.join("clickhouse-spool")
        } else {
            PathBuf::from("wirelog-spool")
        }
    });
    Ok(Some(Config {
        server,
        probe,
        iface: iface.to_string(),
        spool_dir,
        spool_size: a.spool_size,
        batch_rows: a.clickhouse_batch_rows,
        batch_bytes: a.clickhouse_batch_bytes as usize,
        batch_age: a.clickhouse_batch_age,
        drain: a.clickhouse_drain,
        run_key: None,
    }))
}

pub fn run(cmd: ClickhouseCommand) -> Result<ExitCode> {
    match cmd {
        ClickhouseCommand::Init(a) => init(a),
        ClickhouseCommand::Flush(a) => {
            let server = server(&a.server)?.ok_or_else(|| anyhow!("--clickhouse URL is needed"))?;
            if !a.spool_dir.is_dir() {
                bail!("--spool-dir {}: not a directory", a.spool_dir.display());
            }
            let mut sink = ClickHouseSink::start(Config {
                server,
                probe: host_name(),
                iface: String::new(),
                spool_dir: a.spool_dir.clone(),
                spool_size: u64::MAX,
                batch_rows: 1,
                batch_bytes: 1,
                batch_age: Duration::from_secs(1),
                drain: a.wait,
                run_key: None,
            })?;
            let s = sink.finish();
            eprintln!("{}", s.text());
            Ok(if s.left_batches == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

/// Existing tables' columns: (table, column, type).
/// The old name of column `col` of table `t` that the existing table still
/// has (a rename declared with the protocol's columns).
fn renamed_from(t: Table, col: &str, have: &[&(String, String, String)]) -> Option<&'static str> {
    let Table::Store(kind) = t else { return None };
    wirelog_store::schema::old_names(kind, col).find(|old| have.iter().any(|c| c.1 == *old))
}

fn existing_columns(server: &Server) -> Result<Vec<(String, String, String)>> {
    let sql = format!(
        "SELECT table, name, type FROM system.columns WHERE database = {} ORDER BY table, position",
        schema::literal(&server.database)
    );
    let out = run_sql(server, &[sql]).map_err(|e| anyhow!("clickhouse {}: {e}", server.url))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut p = l.splitn(3, '\t');
            Some((p.next()?.to_string(), p.next()?.to_string(), p.next()?.to_string()))
        })
        .collect())
}

fn init(a: ClickhouseInitArgs) -> Result<ExitCode> {
    let server = server(&a.server)?.ok_or_else(|| anyhow!("--clickhouse URL is needed"))?;
    if let Some(r) = a.retain {
        crate::limits::duration_in_range("--retain", r, Duration::from_secs(3600), Duration::from_secs(100 * 365 * 86400))?;
    }
    let layout = Layout {
        database: server.database.clone(),
        cluster: a.cluster.clone(),
        retain: a.retain,
        dedup_window: DEDUP_WINDOW,
    };
    let create = layout.create_statements();
    if a.print {
        for s in &create {
            println!("{s};\n");
        }
        println!("{};", layout.record_version(SCHEMA_VERSION));
        return Ok(ExitCode::SUCCESS);
    }
    let ch = |stmts: &[String]| run_sql(&server, stmts).map_err(|e| anyhow!("clickhouse {}: {e}", server.url));
    let db = schema::literal(&server.database);
    let engines = ch(&[format!("SELECT name, engine FROM system.tables WHERE database = {db}")])?;
    let engines: Vec<(&str, &str)> = engines.lines().filter_map(|l| l.split_once('\t')).collect();
    let version: Option<u32> = if engines.iter().any(|(n, _)| *n == "wirelog_schema") {
        let v = ch(&[format!("SELECT max(version) FROM {}.wirelog_schema", schema::ident(&server.database))])?;
        v.trim().parse().ok()
    } else {
        None
    };
    if let Some(v) = version {
        if v > SCHEMA_VERSION {
            bail!(
                "database {} has schema version {v}, newer than this wirelog's ({SCHEMA_VERSION}): init does not downgrade; use a newer wirelog",
                server.database
            );
        }
    }
    // What cannot be changed in place is said before anything is changed.
    let mut cannot = Vec::new();
    for t in Table::ALL {
        let (name, family) = layout.expected_engine(t);
        if let Some((_, e)) = engines.iter().find(|(n, _)| *n == name) {
            if *e != family {
                cannot.push(format!(
                    "table {name} is {e}, this layout needs {family} (a database made {} --cluster cannot be converted in place: create a new database and INSERT ... SELECT)",
                    if layout.cluster.is_some() { "without" } else { "with" }
                ));
            }
        }
    }
    let cols = existing_columns(&server)?;
    let mut add = Vec::new();
    let mut rename = Vec::new();
    for t in Table::ALL {
        let (name, _) = layout.expected_engine(t);
        let have: Vec<&(String, String, String)> = cols.iter().filter(|c| c.0 == name).collect();
        if have.is_empty() {
            continue;
        }
        let mut prev = None;
        for (col, ty) in t.columns() {
            match have.iter().find(|c| c.1 == col) {
                Some(c) if c.2 != ty.sql() && !(ty.sql().starts_with("DateTime64") && c.2.starts_with("DateTime64(6")) => {
                    cannot.push(format!("{name}.{col} is {}, wirelog writes {} (change it by hand: ALTER TABLE ... MODIFY COLUMN)", c.2, ty.sql()));
                }
                Some(_) => {}
                // A declared rename: the old column takes the new name.
                None => match renamed_from(t, col, &have) {
                    Some(old) => rename.push((t, old, col)),
                    None => add.push((t, col, ty, prev)),
                },
            }
            prev = Some(col);
        }
    }
    if !cannot.is_empty() {
        bail!("database {}: init cannot upgrade it:\n  {}", server.database, cannot.join("\n  "));
    }
    let existed = version.is_some();
    ch(&create)?;
    let mut changes = Vec::new();
    for (t, old, new) in &rename {
        let on = layout.cluster.as_deref().map(|c| format!(" ON CLUSTER {}", schema::ident(c))).unwrap_or_default();
        let mut tables = vec![layout.expected_engine(*t).0];
        if layout.cluster.is_some() {
            tables.push(t.name().to_string());
        }
        for tb in tables {
            changes.push(format!(
                "ALTER TABLE {}.{}{on} RENAME COLUMN IF EXISTS {} TO {}",
                schema::ident(&server.database),
                schema::ident(&tb),
                schema::ident(old),
                schema::ident(new)
            ));
        }
    }
    for (t, col, ty, after) in &add {
        let on = layout.cluster.as_deref().map(|c| format!(" ON CLUSTER {}", schema::ident(c))).unwrap_or_default();
        let mut tables = vec![layout.expected_engine(*t).0];
        if layout.cluster.is_some() {
            tables.push(t.name().to_string());
        }
        for tb in tables {
            // In the schema's place, so RowBinary (which names no columns)
            // fits an upgraded table as it fits a new one.
            let after = after.map(|a| format!(" AFTER {}", schema::ident(a))).unwrap_or_else(|| " FIRST".into());
            changes.push(format!(
                "ALTER TABLE {}.{}{on} ADD COLUMN IF NOT EXISTS {} {}{after}",
                schema::ident(&server.database),
                schema::ident(&tb),
                schema::ident(col),
                ty.sql()
            ));
        }
    }
    let from = version.unwrap_or(SCHEMA_VERSION);
    for v in from + 1..=SCHEMA_VERSION {
        if let Some(m) = schema::MIGRATIONS.get((v - 2) as usize) {
            changes.extend(m.iter().map(|s| s.to_string()));
        }
    }
    if existed && a.retain.is_some() {
        changes.extend(layout.ttl_statements());
    }
    if !changes.is_empty() {
        ch(&changes)?;
    }
    if version != Some(SCHEMA_VERSION) {
        ch(&[layout.record_version(SCHEMA_VERSION)])?;
    }
    match version {
        None => eprintln!(
            "wirelog: clickhouse: database {} created at schema version {SCHEMA_VERSION} ({} tables{})",
            server.database,
            Table::ALL.len(),
            layout.cluster.as_deref().map(|c| format!(", replicated on cluster {c}")).unwrap_or_default()
        ),
        Some(v) if v < SCHEMA_VERSION => eprintln!(
            "wirelog: clickhouse: database {} upgraded from schema version {v} to {SCHEMA_VERSION}",
            server.database
        ),
        Some(_) => eprintln!(
            "wirelog: clickhouse: database {} is at schema version {SCHEMA_VERSION}{}{}",
            server.database,
            if add.is_empty() { String::new() } else { format!("; {} missing columns added", add.len()) },
            if a.retain.is_some() { "; TTL set from --retain" } else { "" }
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// The process's CPU time and resident memory, from /proc.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    cpu_ns: i64,
    rss_bytes: u64,
}

impl Usage {
    pub fn now() -> Usage {
        // utime and stime are fields 14 and 15, in USER_HZ (100 on Linux's
        // ABI), after the command name in parentheses.
        let cpu_ns = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                let rest = &s[s.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some(f.get(11)?.parse::<i64>().ok()? + f.get(12)?.parse::<i64>().ok()?)
            })
            .map_or(0, |ticks| ticks * 10_000_000);
        let rss_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024);
        Usage { cpu_ns, rss_bytes }
    }
}

/// A health row for the interval between two readings of
/// (usage, capture counters, records dropped by the output, when).
pub fn health_row(
    a: &(Usage, wirelog_counters::WorkerStats, u64, std::time::Instant),
    b: &(Usage, wirelog_counters::WorkerStats, u64, std::time::Instant),
) -> wirelog_clickhouse::Health {
    let (ua, sa, da, ta) = a;
    let (ub, sb, db, tb) = b;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    wirelog_clickhouse::Health {
        ts_ns: now.as_nanos() as i64,
        interval_s: tb.duration_since(*ta).as_secs_f64().round() as u32,
        cpu_ns: ub.cpu_ns - ua.cpu_ns,
        rss_bytes: ub.rss_bytes,
        packets: sb.packets - sa.packets,
        bytes: sb.bytes - sa.bytes,
        kernel_drops: sb.kernel_drops - sa.kernel_drops,
        probe_drops: db - da,
        evictions: sb.evicted - sa.evicted,
        parse_errors: (sb.not_decoded + sb.checksum_bad) - (sa.not_decoded + sa.checksum_bad),
        ..Default::default()
    }
}
