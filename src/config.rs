//! `wirelog capture --config FILE`: options kept in a file, one per line,
//! named as on the command line without the dashes:
//!
//! ```text
//! # /etc/wirelog/capture.conf
//! interface = eth0
//! interface = eth1          # repeatable options: one line per value
//! filter = "not port 22"
//! skip-empty-tcp = true     # flags: true or false
//! logs = /var/log/wirelog
//! ```
//!
//! The file is turned into `--name=value` arguments placed before the
//! command line's, so every option parses, validates and shows in `--help`
//! exactly once (in cli.rs). An option given on the command line replaces
//! the file's values of that option entirely, lists included.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::CommandFactory;

use crate::cli::Cli;

/// The subcommands that take `--config`.
const WITH_CONFIG: &[&str] = &["capture"];

/// One option of a subcommand as the file may name it.
struct Opt {
    id: String,
    long: String,
    takes_value: bool,
}

/// The command line with the options of its `--config` file inserted, or
/// unchanged when there is none. Errors name the file and line.
pub fn expand(argv: Vec<OsString>) -> Result<Vec<OsString>> {
    let Some(sub) = argv.get(1).and_then(|s| s.to_str()).filter(|s| WITH_CONFIG.contains(s)) else {
        return Ok(argv);
    };
    let sub = sub.to_string();
    if !argv.iter().any(|a| a.to_str().is_some_and(|a| a == "--config" || a.starts_with("--config="))) {
        return Ok(argv);
    }
    // Parse once with nothing required, to learn the file and which options
    // the command line sets. A command line clap rejects is left as it is:
    // the real parse reports it.
    let lenient = Cli::command().mut_subcommand(&sub, |c| {
        let ids: Vec<String> = c.get_arguments().map(|a| a.get_id().to_string()).collect();
        ids.iter().fold(c, |c, id| c.mut_arg(id, |a| a.required(false)))
    });
    let Ok(matches) = lenient.try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    let Some(m) = matches.subcommand_matches(&sub) else {
        return Ok(argv);
    };
    let Some(file) = m.get_one::<std::path::PathBuf>("config").cloned() else {
        return Ok(argv);
    };
    let opts = options(&sub);
    let given: HashSet<&str> = opts
        .iter()
        .filter(|o| m.value_source(&o.id) == Some(ValueSource::CommandLine))
        .map(|o| o.id.as_str())
        .collect();
    let text = std::fs::read_to_string(&file).with_context(|| format!("--config {}", file.display()))?;
    let from_file = arguments(&file, &text, &opts)?;
    let mut out = argv[..2].to_vec();
    out.extend(from_file.into_iter().filter(|(id, _)| !given.contains(id.as_str())).map(|(_, a)| a));
    out.extend(argv[2..].iter().cloned());
    Ok(out)
}

fn options(sub: &str) -> Vec<Opt> {
    let cmd = Cli::command();
    let Some(c) = cmd.find_subcommand(sub) else {
        return Vec::new();
    };
    c.get_arguments()
        .filter_map(|a| {
            Some(Opt {
                id: a.get_id().to_string(),
                long: a.get_long()?.to_string(),
                takes_value: a.get_action().takes_values(),
            })
        })
        .collect()
}

/// The file's lines as (option id, `--long=value` argument).
fn arguments(file: &Path, text: &str, opts: &[Opt]) -> Result<Vec<(String, OsString)>> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let at = || format!("{}:{}", file.display(), n + 1);
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            bail!("{}: expected `option = value`, found {line:?}", at());
        };
        let name = name.trim().replace('_', "-");
        let Some(opt) = opts.iter().find(|o| o.long == name) else {
            bail!("{}: unknown option {name:?} (see `wirelog capture --help`)", at());
        };
        if opt.id == "config" {
            bail!("{}: a config file cannot name another one", at());
        }
        let value = unquote(value.trim()).with_context(at)?;
        if opt.takes_value {
            out.push((opt.id.clone(), OsString::from(format!("--{name}={value}"))));
        } else {
            match value.as_str() {
                "true" => out.push((opt.id.clone(), OsString::from(format!("--{name}")))),
                "false" => {}
                v => bail!("{}: {name} is a flag: true or false, not {v:?}", at()),
            }
        }
    }
    Ok(out)
}

/// The line up to a `#` outside double quotes.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// A bare value as it is; a double-quoted one without its quotes, with `\"`
/// and `\\` unescaped.
fn unquote(v: &str) -> Result<String> {
    let Some(inner) = v.strip_prefix('"') else {
        return Ok(v.to_string());
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let rest: String = chars.collect();
                if !rest.trim().is_empty() {
                    bail!("text after the closing quote: {rest:?}");
                }
                return Ok(out);
            }
            '\\' => match chars.next() {
                Some(e @ ('"' | '\\')) => out.push(e),
                Some(e) => bail!("unknown escape \\{e} (only \\\" and \\\\)"),
                None => break,
            },
            c => out.push(c),
        }
    }
    bail!("missing closing quote in {v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("wirelog-config-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn file_options_come_first_and_the_command_line_replaces_them() {
        let f = write(
            "merge",
            "# comment\ninterface = eth0\ninterface = eth1\nfilter = \"not port 22 # kept\" # gone\n\
             skip_empty_tcp = true\nno-promisc = false\nworkers = 2\n",
        );
        let got = expand(args(&["wirelog", "capture", "--config", f.to_str().unwrap(), "-i", "lo"])).unwrap();
        let got: Vec<&str> = got.iter().map(|a| a.to_str().unwrap()).collect();
        // -i on the command line drops both interface lines of the file.
        assert_eq!(
            got,
            [
                "wirelog",
                "capture",
                "--filter=not port 22 # kept",
                "--skip-empty-tcp",
                "--workers=2",
                "--config",
                f.to_str().unwrap(),
                "-i",
                "lo"
            ]
        );
        std::fs::remove_file(f).unwrap();
    }

    #[test]
    fn without_config_the_command_line_is_untouched() {
        let a = args(&["wirelog", "capture", "-i", "lo"]);
        assert_eq!(expand(a.clone()).unwrap(), a);
        let a = args(&["wirelog", "read", "--config", "x"]);
        assert_eq!(expand(a.clone()).unwrap(), a);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let opts = options("capture");
        let p = Path::new("w.conf");
        let err = |text: &str| arguments(p, text, &opts).unwrap_err().to_string();
        assert_eq!(err("\ncolour = red"), "w.conf:2: unknown option \"colour\" (see `wirelog capture --help`)");
        assert_eq!(err("workers"), "w.conf:1: expected `option = value`, found \"workers\"");
        assert_eq!(err("skip-empty-tcp = yes"), "w.conf:1: skip-empty-tcp is a flag: true or false, not \"yes\"");
        assert_eq!(err("config = other.conf"), "w.conf:1: a config file cannot name another one");
        let e = arguments(p, "filter = \"port 80", &opts).unwrap_err();
        assert_eq!(format!("{e:#}"), "w.conf:1: missing closing quote in \"port 80");
    }
}
