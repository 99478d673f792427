//! nginx as the tests run it: one process in the foreground, every file it
//! writes (pid, logs, temporary bodies) in the test's own directory.

use std::path::Path;

/// A whole nginx.conf: `http` is the body of its `http { }` block.
pub fn conf(dir: &Path, http: &str) -> String {
    let d = dir.display();
    format!(
        r#"
daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
{http}
}}
"#
    )
}
