use std::sync::Arc;

use crate::IpAddr16;

/// Traffic between a client and a server port in one time bucket, on one
/// interface (goProbe's model): counters per direction relative to the client,
/// the source port left out of the key, distinct connections counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRecord {
    /// Start of the time bucket (ns since the epoch, aligned to the wall clock).
    pub bucket_ns: i64,
    /// Interface name (live capture) or `file:IFID` (capture files).
    pub iface: Arc<str>,
    pub client: IpAddr16,
    pub server: IpAddr16,
    pub server_port: u16,
    pub proto: u8,
    /// IP bytes and packets from the client to the server.
    pub bytes_out: u64,
    pub pkts_out: u64,
    /// IP bytes and packets from the server to the client.
    pub bytes_in: u64,
    pub pkts_in: u64,
    /// First and last packet of this flow within the bucket.
    pub first_ns: i64,
    pub last_ns: i64,
    /// Distinct connections (5-tuples) seen in this bucket.
    pub conns: u32,
}
