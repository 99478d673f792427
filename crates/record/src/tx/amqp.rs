//! What an AMQP 0-9-1 exchange records (filled in by `wirelog_parse::amqp`):
//! one transaction per method that starts an exchange (a synchronous method
//! and its `-ok`, a published message with its confirm when the channel is
//! in confirm mode, a message the server delivers, an acknowledgement).

/// One exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AmqpTx {
    /// `<class>.<method>` of the method that started it (`basic.publish`,
    /// `queue.declare`, `channel.close`, `basic.deliver`, ...).
    pub method: &'static str,
    /// The method that answered it (`queue.declare-ok`, `basic.get-empty`,
    /// `basic.ack` for a confirmed publish, ...).
    pub answer: Option<&'static str>,
    /// The server started it (`basic.deliver`, `basic.return`,
    /// `connection.start`, a close the server sent).
    pub from_server: bool,
    pub channel: u16,
    pub exchange: Option<String>,
    /// `exchange.declare`'s type (`direct`, `fanout`, `topic`, ...).
    pub exchange_type: Option<String>,
    pub routing_key: Option<String>,
    /// The queue named (or, for a `queue.declare` with an empty name, the
    /// one the server made up).
    pub queue: Option<String>,
    /// The method's flags that were set, by their names in the spec,
    /// comma-separated (`durable,auto-delete`, `no-ack`, `mandatory`).
    pub flags: String,
    /// The message's body size, from its content header.
    pub body_bytes: Option<u64>,
    /// The content header's content-type.
    pub content_type: Option<String>,
    /// The delivery tag: a delivered message's, an acknowledgement's, or a
    /// published message's sequence number in confirm mode.
    pub delivery_tag: Option<u64>,
    /// A close's or a return's reply code (200: success).
    pub reply_code: Option<u16>,
    pub reply_text: Option<String>,
    /// Messages a `queue.declare-ok`, `queue.purge-ok`, `queue.delete-ok`
    /// or `basic.get-ok` counted.
    pub messages: Option<u64>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const U16: crate::columns::Type = Count { bits: 16, unit: Unit::Plain };

/// AMQP's columns, in amqp.log's order (ours: Zeek has no AMQP log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("method", Text, Low, "The method that started the exchange, class.method (basic.publish, queue.declare, ...).", get!(Amqp, |r, a| Val::Text(Some(a.method)))).brief(),
        C::new("answer", Text, Low, "The method that answered it (queue.declare-ok, basic.get-empty, basic.ack, ...).", get!(Amqp, |r, a| Val::Text(a.answer))),
        C::new("from_server", Bool, Low, "Started by the server (basic.deliver, basic.return, connection.start, a server's close).", get!(Amqp, |r, a| Val::Bool(Some(a.from_server)))),
        C::new("channel", U16, Low, "The channel.", get!(Amqp, |r, a| Val::Count(Some(u64::from(a.channel))))),
        C::new("exchange", Text, Mid, "The exchange named.", get!(Amqp, |r, a| Val::Text(a.exchange.as_deref()))).brief(),
        C::new("exchange_type", Text, Low, "exchange.declare's type (direct, fanout, topic, headers).", get!(Amqp, |r, a| Val::Text(a.exchange_type.as_deref()))),
        C::new("routing_key", Text, Mid, "The routing key.", get!(Amqp, |r, a| Val::Text(a.routing_key.as_deref()))).brief(),
        C::new("queue", Text, Mid, "The queue named (the server's name for a declare without one).", get!(Amqp, |r, a| Val::Text(a.queue.as_deref()))).brief(),
        C::new("flags", Text, Low, "The method's flags that were set, comma-separated (durable, auto-delete, exclusive, no-ack, mandatory, ...).", get!(Amqp, |r, a| Val::text(&a.flags))),
        C::new("body_bytes", Count { bits: 64, unit: Unit::Bytes }, Low, "The message's body size (from its content header).", get!(Amqp, |r, a| Val::Count(a.body_bytes))),
        C::new("content_type", Text, Low, "The content header's content-type.", get!(Amqp, |r, a| Val::Text(a.content_type.as_deref()))),
        C::new("delivery_tag", Count { bits: 64, unit: Unit::Plain }, High, "Delivery tag (a published message's sequence number in confirm mode).", get!(Amqp, |r, a| Val::Count(a.delivery_tag))),
        C::new("reply_code", U16, Low, "A close's or return's reply code (200: success).", get!(Amqp, |r, a| Val::Count(a.reply_code.map(u64::from)))).brief(),
        C::new("reply_text", Text, High, "A close's or return's reply text.", get!(Amqp, |r, a| Val::Text(a.reply_text.as_deref()))),
        C::new("messages", Count { bits: 64, unit: Unit::Count }, Low, "Messages a declare-ok, purge-ok, delete-ok or get-ok counted.", get!(Amqp, |r, a| Val::Count(a.messages))),
    ],
    store_order: &[],
    by: &["method", "exchange", "queue"],
    shape: &["method", "exchange", "routing_key"],
    renamed: &[],
    log_text: LogText::Utf8,
};
