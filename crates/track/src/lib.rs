//! Track: connections with Zeek conn.log semantics, and flows (goProbe-style aggregates).
//!
//! A pre-sized open-addressing table keyed by the connection tuple, a timer
//! wheel on packet time, and per-protocol state (the TCP part follows Zeek's
//! TCP analyzer, and lives in a slab beside the table: a UDP or ICMP entry is
//! half the size of a TCP connection). Packets go in through [`Tracker::packet`]; records of ended
//! connections come out of [`Tracker::take_records`]. Nothing on the per-packet
//! path allocates except a TCP connection's first out-of-order range.
//!
//! With [`TrackerConfig::app`] set, connections of recognised protocols also
//! get their streams reassembled and parsed (see `app`); transactions come out
//! of [`Tracker::take_transactions`].

mod app;
mod conn;
mod flow;
mod history;
mod keep;
mod kernel;
mod key;
mod ports;
mod slab;
mod table;
mod tcp;
mod timer;
mod tracker;
mod zeek_ports;

pub use app::{AppConfig, AppStats};
pub use flow::{FlowKey, FlowSlot, FlowTable};
pub use keep::{KeepRule, KeepVerdict};
pub use kernel::{KernelAccounting, DEFAULT_MAX_CONNECTIONS as KERNEL_MAX_CONNECTIONS};
pub use key::{ConnKey, Side};
pub use ports::{PortSet, ZeekServerPort, DEFAULT_TCP_SERVER_PORTS, DEFAULT_UDP_SERVER_PORTS, ZEEK_SERVER_PORTS};
pub use tracker::{SharedMemory, TrackStats, Tracker, TrackerConfig, THIN_FLOOR};
