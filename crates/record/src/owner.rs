//! Who is behind a record's local ends (`capture --processes`): the owner's
//! fields, and the trait through which the output stage asks the resolver
//! (`wirelog-procs`, which reads /proc and sock_diag) for them, so that
//! the output stage and the store need not link the resolver.

use std::time::Duration;

use crate::Batch;

/// Who is behind one local end of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcOwner {
    pub pid: u32,
    /// The process name (`comm`, at most 15 bytes).
    pub name: String,
    /// The executable's path ("" when unreadable, e.g. a kernel thread).
    pub exe: String,
    pub uid: u32,
    /// The user's name from /etc/passwd, else the uid in decimal.
    pub user: String,
    /// `docker:ID`, `containerd:ID`, `crio:ID`, a systemd unit
    /// (`nginx.service`, `session-3.scope`), else the cgroup path; "" at
    /// the root cgroup.
    pub container: String,
    /// Kubernetes pod as `QOS/UID` (`burstable/0f1e…`), when the cgroup
    /// path says so.
    pub pod: String,
}

/// The owners of connection ends, as the output thread sees them: it calls
/// [`own`](Self::own) before a batch goes to the sinks and
/// [`forget`](Self::forget) after.
pub trait ProcOwners: Send {
    /// Gives each record of `batch` the owners of its local ends, after
    /// waiting at most `limit` for the resolver to see every connection
    /// queued before; false when it had not caught up (the records get the
    /// owners known so far).
    fn own(&self, batch: &mut Batch, limit: Duration) -> bool;
    /// `batch` was written: the owners of its connections are not needed
    /// again.
    fn forget(&self, batch: &Batch);
}
