//! What a Kafka request records (filled in by `wirelog_parse::kafka`): one
//! transaction per request and its response, paired by correlation id.

/// One request and its response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KafkaTx {
    /// The API's name, snake case as Kafka's message definitions name them
    /// (`produce`, `fetch`, `metadata`, `api_versions`, ...; `api_<key>`
    /// for a key this parser does not name).
    pub api: &'static str,
    pub api_key: u16,
    pub api_version: u16,
    pub correlation_id: u32,
    pub client_id: Option<String>,
    /// The first topic the request names.
    pub topic: Option<String>,
    /// Topics the request names.
    pub topics: Option<u32>,
    /// Partitions the request names (over all its topics).
    pub partitions: Option<u32>,
    /// The consumer group (FindCoordinator's key, JoinGroup, SyncGroup,
    /// Heartbeat, OffsetCommit, OffsetFetch).
    pub group: Option<String>,
    /// Produce's acks: `-1` (all), `0`, `1`.
    pub acks: Option<&'static str>,
    /// Fetch's max wait: how long the broker may hold the request (the
    /// latency of a fetch includes it).
    pub max_wait_ms: Option<u32>,
    /// The response's throttle time.
    pub throttle_ms: Option<u32>,
    /// The first non-zero error code of the response, by its name in
    /// Kafka's protocol guide where known, else its number.
    pub error: Option<String>,
    /// Non-zero error codes in the response.
    pub errors: Option<u32>,
    /// Records a Produce request sent or a Fetch response returned (from
    /// the record batch headers).
    pub records: Option<u64>,
    /// Bytes of those record batches.
    pub record_bytes: Option<u64>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const U16: crate::columns::Type = Count { bits: 16, unit: Unit::Plain };

/// Kafka's columns, in kafka.log's order (ours: Zeek has no Kafka log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("api", Text, Low, "The API (produce, fetch, metadata, api_versions, find_coordinator, join_group, ...).", get!(Kafka, |r, k| Val::Text(Some(k.api)))).brief(),
        C::new("api_key", U16, Low, "The API's key.", get!(Kafka, |r, k| Val::Count(Some(u64::from(k.api_key))))),
        C::new("api_version", U16, Low, "The API's version the request used.", get!(Kafka, |r, k| Val::Count(Some(u64::from(k.api_version))))),
        C::new("correlation_id", Count { bits: 64, unit: Unit::Plain }, High, "The correlation id pairing request and response.", get!(Kafka, |r, k| Val::Count(Some(u64::from(k.correlation_id))))),
        C::new("client_id", Text, Low, "The client's id.", get!(Kafka, |r, k| Val::Text(k.client_id.as_deref()))).brief(),
        C::new("topic", Text, Mid, "The first topic the request names.", get!(Kafka, |r, k| Val::Text(k.topic.as_deref()))).brief(),
        C::new("topics", Count { bits: 64, unit: Unit::Count }, Low, "Topics the request names.", get!(Kafka, |r, k| Val::Count(k.topics.map(u64::from)))),
        C::new("partitions", Count { bits: 64, unit: Unit::Count }, Low, "Partitions the request names.", get!(Kafka, |r, k| Val::Count(k.partitions.map(u64::from)))),
        C::new("group", Text, Mid, "The consumer group.", get!(Kafka, |r, k| Val::Text(k.group.as_deref()))),
        C::new("acks", Text, Low, "Produce's acks (-1: all, 0, 1).", get!(Kafka, |r, k| Val::Text(k.acks))),
        C::new("max_wait_ms", Count { bits: 64, unit: Unit::Plain }, Low, "Fetch's max wait in ms (the latency of a fetch includes it).", get!(Kafka, |r, k| Val::Count(k.max_wait_ms.map(u64::from)))),
        C::new("throttle_ms", Count { bits: 64, unit: Unit::Plain }, Low, "The response's throttle time in ms.", get!(Kafka, |r, k| Val::Count(k.throttle_ms.map(u64::from)))),
        C::new("error", Text, Low, "The response's first non-zero error code, by name.", get!(Kafka, |r, k| Val::Text(k.error.as_deref()))).brief(),
        C::new("errors", Count { bits: 64, unit: Unit::Count }, Low, "Non-zero error codes in the response.", get!(Kafka, |r, k| Val::Count(k.errors.map(u64::from)))),
        C::new("records", Count { bits: 64, unit: Unit::Count }, Low, "Records produced or fetched (record batch headers).", get!(Kafka, |r, k| Val::Count(k.records))),
        C::new("record_bytes", Count { bits: 64, unit: Unit::Bytes }, Low, "Bytes of those record batches.", get!(Kafka, |r, k| Val::Count(k.record_bytes))),
    ],
    store_order: &[],
    by: &["api", "topic"],
    shape: &["api", "topic"],
    renamed: &[],
    log_text: LogText::Utf8,
};
