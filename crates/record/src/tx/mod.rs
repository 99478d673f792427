//! Transactions: one request and its response as a parser reports it
//! ([`Transaction`], with the protocol's own fields in [`Detail`]), and the
//! record of one, tagged with its connection ([`TxRecord`]).

pub mod dns;
pub mod grpc;
pub mod http;
pub mod memcached;
pub mod mongodb;
pub mod mqtt;
pub mod amqp;
pub mod kafka;
pub mod cassandra;
pub mod mysql;
pub mod pgsql;
pub mod redis;
pub mod tls;
pub mod text;

use wirelog_packet::IpAddr16;

use crate::{Proto, Protocol, Uid};

/// One direction's part of a transaction: when its first and last byte were
/// seen and how many application bytes it had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub first_ns: i64,
    pub last_ns: i64,
    pub bytes: u64,
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxStatus {
    /// Request and response, and the response says success.
    Ok,
    /// Request and response, and the response is an error (HTTP >= 400, SQL
    /// error, RESP error, DNS rcode != 0).
    Error,
    /// A request without a response before the timeout or the connection's end.
    NoResponse,
    /// A response whose request was not seen (capture started mid-stream, gap).
    NoRequest,
    /// Request and the start of a response, but the stream ended (connection
    /// closed, capture stopped) before the response's declared end: sizes and
    /// latency cover only what was seen.
    Partial,
}

impl TxStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            TxStatus::Ok => "ok",
            TxStatus::Error => "error",
            TxStatus::NoResponse => "no_response",
            TxStatus::NoRequest => "no_request",
            TxStatus::Partial => "partial",
        }
    }
}

/// One request and its response (either may be missing, see [`TxStatus`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Transaction {
    pub request: Option<Span>,
    pub response: Option<Span>,
    pub status: TxStatus,
    pub detail: Detail,
}

impl Transaction {
    /// Time of the request's first byte, or of the response's when there is no request.
    pub fn ts_ns(&self) -> i64 {
        self.request.or(self.response).map_or(0, |s| s.first_ns)
    }

    /// First request byte to last response byte.
    pub fn latency_ns(&self) -> Option<i64> {
        Some(self.response?.last_ns - self.request?.first_ns)
    }

    /// First request byte to first response byte.
    pub fn first_byte_latency_ns(&self) -> Option<i64> {
        Some(self.response?.first_ns - self.request?.first_ns)
    }
}

/// Protocol-specific fields of a transaction.
// Transactions are made and moved by value in batches on the packet path,
// which allocates nothing per packet: boxing the larger variants would cost
// an allocation per transaction. TLS's alone is boxed: its 592 bytes (the
// certificates' and extensions' lists, HTTP's 376 the next largest) set
// every transaction's size, and each is moved three times between the
// parser and the batch (a MySQL statement's moves copied 592 bytes each);
// a handshake is one transaction a connection, which allocates its names
// and certificates anyway.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    Http(crate::http::HttpTx),
    Mysql(crate::mysql::MysqlTx),
    Pgsql(crate::pgsql::PgsqlTx),
    Redis(crate::redis::RedisTx),
    Dns(crate::dns::DnsTx),
    Tls(Box<crate::tls::TlsTx>),
    Memcached(crate::memcached::MemcachedTx),
    Mongodb(crate::mongodb::MongodbTx),
    Mqtt(crate::mqtt::MqttTx),
    Amqp(crate::amqp::AmqpTx),
    Kafka(crate::kafka::KafkaTx),
    Cassandra(crate::cassandra::CassandraTx),
    Grpc(crate::grpc::GrpcTx),
}

impl Detail {
    /// The protocol whose transaction this is (a connection's parser may
    /// hand over: TLS inside MySQL is a TLS transaction).
    pub fn protocol(&self) -> Protocol {
        match self {
            Detail::Http(_) => Protocol::Http,
            Detail::Mysql(_) => Protocol::Mysql,
            Detail::Pgsql(_) => Protocol::Pgsql,
            Detail::Redis(_) => Protocol::Redis,
            Detail::Dns(_) => Protocol::Dns,
            Detail::Tls(_) => Protocol::Tls,
            Detail::Memcached(_) => Protocol::Memcached,
            Detail::Mongodb(_) => Protocol::Mongodb,
            Detail::Mqtt(_) => Protocol::Mqtt,
            Detail::Amqp(_) => Protocol::Amqp,
            Detail::Kafka(_) => Protocol::Kafka,
            Detail::Cassandra(_) => Protocol::Cassandra,
            Detail::Grpc(_) => Protocol::Grpc,
        }
    }
}


#[derive(Debug, Clone)]
pub struct TxRecord {
    /// The uid of the connection (the same as in its conn record).
    pub uid: Uid,
    /// Client (the connection's originator) and server.
    pub orig_h: IpAddr16,
    pub orig_p: u16,
    pub resp_h: IpAddr16,
    pub resp_p: u16,
    pub transport: Proto,
    pub protocol: Protocol,
    pub tx: Transaction,
    /// The processes behind the client and server ends (see `ConnRecord`).
    pub orig_proc: crate::Proc,
    pub resp_proc: crate::Proc,
    /// Where the parsed bytes came from.
    pub source: TxSource,
    /// How many transactions this one stands for: 1, or N when its
    /// connection was one of 1 in N parsed (`capture --cpu-budget` sheds
    /// parsing that way). Sums of weights estimate what all were.
    pub sample_weight: u32,
}

/// Where a transaction's bytes came from: the packets (the default), or
/// the plaintext a process handed its TLS library (`capture --tls-plaintext`),
/// or the bytes it moved through its socket's system calls (`capture
/// --socket-data`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TxSource {
    #[default]
    Packets,
    TlsLibrary,
    Socket,
}

impl TxSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TxSource::Packets => "packets",
            TxSource::TlsLibrary => "tls-library",
            TxSource::Socket => "socket",
        }
    }
}

/// The output thread's join of transactions made off the packet path
/// (`capture --tls-plaintext`) with the connections the packet path
/// records: called on every batch before the sinks, and on each tick, so
/// that it can give such transactions their connection's uid (and the
/// connection its service) and release what it holds.
pub trait TxJoin: Send {
    /// Takes what `batch` carries to hold, and adds what it releases.
    fn join(&mut self, batch: &mut crate::Batch);
    /// Time passed (about once a second): adds to `batch` what waited too
    /// long for its connection.
    fn tick(&mut self, batch: &mut crate::Batch);
    /// The run ends: adds everything still held.
    fn finish(&mut self, batch: &mut crate::Batch);
}
