//! The owner of a socket as records name it: process, user and container,
//! read from /proc/PID/{comm,exe,status,cgroup} and /etc/passwd.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use wirelog_record::ProcOwner as Owner;

/// Reads a process's owner fields; `None` when it has gone.
pub fn read(pid: u32, users: &mut Users) -> Option<Owner> {
    let base = format!("/proc/{pid}");
    let status = std::fs::read_to_string(format!("{base}/status")).ok()?;
    let name = std::fs::read_to_string(format!("{base}/comm")).ok()?.trim_end_matches('\n').to_string();
    // The effective uid: what the process acts as.
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let exe = std::fs::read_link(format!("{base}/exe"))
        .map(|p| p.to_string_lossy().trim_end_matches(" (deleted)").to_string())
        .unwrap_or_default();
    let (container, pod) = std::fs::read_to_string(format!("{base}/cgroup"))
        .map(|c| container_of(&c))
        .unwrap_or_default();
    Some(Owner { pid, name, exe, uid, user: users.name(uid), container, pod })
}

/// Names the container or unit of a process from its /proc/PID/cgroup.
/// Container ids are looked for on every hierarchy's path (cgroup v1 and
/// v2 name them the same way); otherwise the v2 path, else systemd's v1
/// path, else the first non-root one decides.
pub fn container_of(cgroup: &str) -> (String, String) {
    let paths: Vec<(&str, &str)> = cgroup
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
            Some((ctrl, path))
        })
        .collect();
    for (_, path) in &paths {
        if let Some(found) = runtime_container(path) {
            return found;
        }
    }
    let pick = paths
        .iter()
        .find(|(c, p)| c.is_empty() && *p != "/")
        .or_else(|| paths.iter().find(|(c, p)| *c == "name=systemd" && *p != "/"))
        .or_else(|| paths.iter().find(|(_, p)| *p != "/"));
    let Some((_, path)) = pick else {
        return (String::new(), String::new());
    };
    // A systemd unit names itself in the last component.
    let last = path.rsplit('/').next().unwrap_or(path);
    if last.ends_with(".service") || last.ends_with(".scope") {
        (last.to_string(), String::new())
    } else {
        (path.to_string(), String::new())
    }
}

/// Docker, containerd and CRI-O container ids (64 hex digits) in their
/// cgroupfs (`/docker/ID`) and systemd (`docker-ID.scope`) spellings, and
/// the Kubernetes pod around them (`kubepods/burstable/podUID/ID` or
/// `kubepods-burstable-podUID.slice`).
fn runtime_container(path: &str) -> Option<(String, String)> {
    let mut container = None;
    let mut pod = String::new();
    let mut qos = "guaranteed";
    let mut in_kube = false;
    for comp in path.split('/') {
        let c = comp.strip_suffix(".scope").or_else(|| comp.strip_suffix(".slice")).unwrap_or(comp);
        if c.starts_with("kubepods") {
            in_kube = true;
            // systemd spelling: kubepods-besteffort-pod<uid with _>.
            for part in c.split('-') {
                match part {
                    "besteffort" | "burstable" => qos = if part == "besteffort" { "besteffort" } else { "burstable" },
                    p if p.starts_with("pod") => pod = p[3..].replace('_', "-"),
                    _ => {}
                }
            }
            continue;
        }
        if in_kube && (c == "besteffort" || c == "burstable") {
            qos = if c == "besteffort" { "besteffort" } else { "burstable" };
            continue;
        }
        if in_kube && c.starts_with("pod") && c.len() > 3 {
            pod = c[3..].replace('_', "-");
            continue;
        }
        let (runtime, id) = match c.rsplit_once('-') {
            Some(("docker", id)) => ("docker", id),
            Some(("cri-containerd", id)) => ("containerd", id),
            Some(("crio", id)) => ("crio", id),
            _ if is_container_id(c) => (if path.contains("docker") { "docker" } else { "container" }, c),
            _ => continue,
        };
        if is_container_id(id) {
            container = Some(format!("{runtime}:{id}"));
        }
    }
    if container.is_none() && pod.is_empty() {
        return None;
    }
    let pod = if pod.is_empty() { pod } else { format!("{qos}/{pod}") };
    Some((container.unwrap_or_default(), pod))
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// User names by uid from /etc/passwd, read again only when a uid is not
/// in it and the file changed.
#[derive(Default)]
pub struct Users {
    names: HashMap<u32, Arc<str>>,
    mtime: Option<std::time::SystemTime>,
}

impl Users {
    pub fn name(&mut self, uid: u32) -> String {
        if !self.names.contains_key(&uid) {
            self.reload(Path::new("/etc/passwd"));
        }
        self.names.get(&uid).map(|n| n.to_string()).unwrap_or_else(|| uid.to_string())
    }

    fn reload(&mut self, path: &Path) {
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if mtime.is_some() && mtime == self.mtime {
            return;
        }
        self.mtime = mtime;
        if let Ok(text) = std::fs::read_to_string(path) {
            for l in text.lines() {
                let f: Vec<&str> = l.split(':').collect();
                if let (Some(name), Some(Ok(uid))) = (f.first(), f.get(2).map(|u| u.parse::<u32>())) {
                    self.names.entry(uid).or_insert_with(|| Arc::from(*name));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e8d1c2b7a69584736251409f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6";

    #[test]
    fn docker_containerd_crio_and_kubernetes_paths() {
        assert_eq!(container_of(&format!("0::/docker/{ID}\n")), (format!("docker:{ID}"), String::new()));
        assert_eq!(
            container_of(&format!("0::/system.slice/docker-{ID}.scope\n")),
            (format!("docker:{ID}"), String::new())
        );
        assert_eq!(
            container_of(&format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-{ID}.scope\n"
            )),
            (format!("containerd:{ID}"), "burstable/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_string())
        );
        assert_eq!(
            container_of(&format!("4:memory:/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/{ID}\n0::/\n")),
            (format!("container:{ID}"), "besteffort/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_string())
        );
        assert_eq!(
            container_of(&format!("0::/kubepods/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/crio-{ID}\n")),
            (format!("crio:{ID}"), "guaranteed/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_string())
        );
    }

    #[test]
    fn systemd_units_then_plain_paths() {
        assert_eq!(container_of("0::/system.slice/nginx.service\n").0, "nginx.service");
        assert_eq!(container_of("1:name=systemd:/user.slice/user-0.slice/session-3.scope\n0::/\n").0, "session-3.scope");
        assert_eq!(container_of("0::/wltest-42\n").0, "/wltest-42");
        // cgroup v1 + v2 hybrid: the v2 path wins over other hierarchies.
        assert_eq!(container_of("4:memory:/sandbox/x\n1:name=systemd:/\n0::/wltest-7\n").0, "/wltest-7");
        assert_eq!(container_of("4:memory:/sandbox/x\n1:name=systemd:/\n0::/\n").0, "/sandbox/x");
        assert_eq!(container_of("0::/\n"), (String::new(), String::new()));
    }

    #[test]
    fn this_process() {
        let mut users = Users::default();
        let me = read(std::process::id(), &mut users).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(!me.name.is_empty());
        assert_eq!(me.exe, std::env::current_exe().unwrap().to_string_lossy());
        if me.uid == 0 {
            assert_eq!(me.user, "root");
        }
    }
}
