//! What an MQTT exchange records (filled in by `wirelog_parse::mqtt`): one
//! transaction per control packet that starts an exchange (CONNECT and its
//! CONNACK, PUBLISH and its PUBACK or PUBREC/PUBREL/PUBCOMP, SUBSCRIBE and
//! its SUBACK, UNSUBSCRIBE and its UNSUBACK, PINGREQ and its PINGRESP,
//! DISCONNECT, AUTH), MQTT 3.1, 3.1.1 and 5.

/// One exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MqttTx {
    /// The packet that started it, lower case: `connect`, `publish`,
    /// `subscribe`, `unsubscribe`, `pingreq`, `disconnect`, `auth`; an
    /// answer whose packet was not seen keeps its own name (`connack`,
    /// `puback`, `suback`, ...).
    pub packet_type: &'static str,
    /// The server sent it: a message delivered to a subscriber, a server's
    /// DISCONNECT (MQTT 5) or AUTH.
    pub from_server: bool,
    /// The protocol level CONNECT named: 3 (3.1), 4 (3.1.1), 5.
    pub version: Option<u8>,
    /// CONNECT's client identifier (empty: the server assigns one).
    pub client_id: Option<String>,
    /// PUBLISH's topic name, or the first topic filter of a SUBSCRIBE or
    /// UNSUBSCRIBE.
    pub topic: Option<String>,
    /// Topic filters a SUBSCRIBE or UNSUBSCRIBE names.
    pub topics: Option<u32>,
    /// PUBLISH's quality of service (0, 1, 2), a SUBSCRIBE's first
    /// filter's requested maximum.
    pub qos: Option<u8>,
    /// PUBLISH's retain flag.
    pub retain: bool,
    /// PUBLISH's dup flag (a resent message).
    pub dup: bool,
    /// The packet identifier that paired the packets (QoS 1 and 2,
    /// SUBSCRIBE, UNSUBSCRIBE).
    pub packet_id: Option<u16>,
    /// PUBLISH's application message bytes.
    pub payload_bytes: Option<u64>,
    /// The answer's code: CONNACK's return (3.1.1) or reason code (5), the
    /// reason code of PUBACK/PUBREC/PUBCOMP (5; 0 when absent), the first
    /// failing code of a SUBACK or UNSUBACK (else its first), a
    /// DISCONNECT's reason (5).
    pub reason_code: Option<u8>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const U16: crate::columns::Type = Count { bits: 16, unit: Unit::Plain };

/// MQTT's columns, in mqtt.log's order (ours: Zeek's MQTT analyzer writes
/// three logs, mqtt_connect, mqtt_publish and mqtt_subscribe, one per kind of
/// exchange; this is one log for all of them).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("packet_type", Text, Low, "The control packet that started the exchange (connect, publish, subscribe, pingreq, ...).", get!(Mqtt, |r, m| Val::Text(Some(m.packet_type)))).brief(),
        C::new("from_server", Bool, Low, "Sent by the server (a message delivered to a subscriber, a server's disconnect).", get!(Mqtt, |r, m| Val::Bool(Some(m.from_server)))),
        C::new("version", U16, Low, "Protocol level from CONNECT: 3 (3.1), 4 (3.1.1), 5.", get!(Mqtt, |r, m| Val::Count(m.version.map(u64::from)))),
        C::new("client_id", Text, Mid, "CONNECT's client identifier.", get!(Mqtt, |r, m| Val::Text(m.client_id.as_deref()))).brief(),
        C::new("topic", Text, Mid, "PUBLISH's topic, or a SUBSCRIBE's or UNSUBSCRIBE's first topic filter.", get!(Mqtt, |r, m| Val::Text(m.topic.as_deref()))).brief(),
        C::new("topics", Count { bits: 64, unit: Unit::Count }, Low, "Topic filters a SUBSCRIBE or UNSUBSCRIBE names.", get!(Mqtt, |r, m| Val::Count(m.topics.map(u64::from)))),
        C::new("qos", U16, Low, "PUBLISH's quality of service (a SUBSCRIBE's first requested maximum).", get!(Mqtt, |r, m| Val::Count(m.qos.map(u64::from)))).brief(),
        C::new("retain", Bool, Low, "PUBLISH's retain flag.", get!(Mqtt, |r, m| Val::Bool(Some(m.retain)))),
        C::new("dup", Bool, Low, "PUBLISH's dup flag (a resent message).", get!(Mqtt, |r, m| Val::Bool(Some(m.dup)))),
        C::new("packet_id", U16, High, "Packet identifier pairing the exchange's packets.", get!(Mqtt, |r, m| Val::Count(m.packet_id.map(u64::from)))),
        C::new("payload_bytes", Count { bits: 64, unit: Unit::Bytes }, Low, "PUBLISH's application message bytes.", get!(Mqtt, |r, m| Val::Count(m.payload_bytes))),
        C::new("reason_code", U16, Low, "The answer's return or reason code (CONNACK, PUBACK, SUBACK's first failure, DISCONNECT).", get!(Mqtt, |r, m| Val::Count(m.reason_code.map(u64::from)))).brief(),
    ],
    store_order: &[],
    by: &["packet_type", "topic"],
    shape: &["packet_type", "topic"],
    renamed: &[],
    log_text: LogText::Utf8,
};
