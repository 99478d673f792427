//! Records: the typed output of tracking (connections, flows, application
//! transactions), produced by `track` and `parse`, consumed by sinks, the
//! store and queries; and the protocol table ([`Protocol`]). Also the X.509
//! decoder ([`x509`]): TLS records carry certificates as DER, and the output
//! side (sinks, store) decodes them, off the packet path.
//!
//! Records have a fixed schema (plain structs, no maps) so sinks can write
//! them as columns or as Zeek-compatible text without guessing.

// The one exception is `sha256::ni`, the SHA-NI block function (x86 intrinsics
// on raw loads), allowed there; everything else is safe code.
#![deny(unsafe_code)]

mod batch;
pub mod civil;
pub mod columns;
mod community_id;
mod conn;
mod flow;
pub mod loss;
mod owner;
mod protocol;
pub mod md5;
pub mod sha256;
mod tx;
mod uid;
pub mod x509;

pub use batch::{Batch, Ingest, RECYCLED_CAPACITY};
pub use community_id::{community_id_v1, CommunityId};
pub use conn::{ConnRecord, ConnState, History, Proto};
pub use flow::FlowRecord;
pub use loss::{LossCount, LossCounts, LossMeter, LossRecord, LossTotals};
pub use protocol::Protocol;
pub use tx::{dns, http, grpc, memcached, mongodb, mysql, pgsql, redis, tls, Detail, Span, Transaction, TxJoin, TxRecord, TxSource, TxStatus};
pub use tx::mqtt;
pub use tx::amqp;
pub use tx::kafka;
pub use tx::cassandra;
pub use tx::text::SmallText;
pub use uid::{Uid, UidGenerator};
pub use owner::{ProcOwner, ProcOwners};
pub use wirelog_packet::IpAddr16;

/// The process behind one end of a record, shared by every record of the
/// connection (live capture with `--processes` only).
pub type Proc = Option<std::sync::Arc<ProcOwner>>;
