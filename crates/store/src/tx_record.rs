//! Transaction records (from the parsers) to store rows: the one place that
//! maps each protocol's fields onto its columns, in
//! [`tx_columns`](crate::schema::tx_columns) order.

use wirelog_parse::{Detail, Protocol};
use wirelog_record::{Proto, TxRecord};

use crate::batch::Kind;
use crate::tx::{Cell, TxRow};

/// The store kind of a protocol's transactions.
pub fn tx_kind(p: Protocol) -> Kind {
    match p {
        Protocol::Http => Kind::Http,
        Protocol::Mysql => Kind::Mysql,
        Protocol::Pgsql => Kind::Pgsql,
        Protocol::Redis => Kind::Redis,
        Protocol::Dns => Kind::Dns,
    }
}

fn s(v: &str) -> Cell {
    Cell::Str((!v.is_empty()).then(|| v.to_string()))
}

fn so(v: Option<&str>) -> Cell {
    Cell::Str(v.map(str::to_string))
}

fn n(v: Option<u64>) -> Cell {
    Cell::U64(v)
}

impl TxRow {
    /// The row of a transaction record.
    pub fn from_record(r: &TxRecord) -> TxRow {
        let tx = &r.tx;
        let extra = match &tx.detail {
            Detail::Http(h) => vec![
                s(&h.method),
                s(&h.host),
                s(&h.uri),
                s(&h.version),
                s(&h.user_agent),
                n((h.status_code != 0).then_some(h.status_code as u64)),
                s(&h.reason),
                n(tx.request.map(|_| h.request_body_len)),
                n(tx.response.map(|_| h.response_body_len)),
            ],
            Detail::Mysql(m) => vec![
                Cell::Str(Some(m.command.to_string())),
                so(m.query.as_deref()),
                so(m.fingerprint.as_deref()),
                so(m.database.as_deref()),
                so(m.user.as_deref()),
                n(m.affected_rows),
                n(m.insert_id),
                n(m.num_rows),
                n(m.num_fields),
                n(m.error_code.map(u64::from)),
                so(m.sql_state.as_deref()),
                so(m.error_message.as_deref()),
            ],
            Detail::Pgsql(p) => vec![
                Cell::Str(Some(p.kind.to_string())),
                so(p.query.as_deref()),
                so(p.fingerprint.as_deref()),
                so(p.database.as_deref()),
                so(p.user.as_deref()),
                so(p.command_tag.as_deref()),
                n(p.rows),
                n(p.num_fields.map(u64::from)),
                so(p.error_severity.as_deref()),
                so(p.error_code.as_deref()),
                so(p.error_message.as_deref()),
            ],
            Detail::Redis(x) => vec![
                s(&x.command),
                s(&x.args),
                so(x.reply_type),
                so(x.reply.as_deref()),
            ],
            Detail::Dns(d) => {
                let answered = tx.response.is_some();
                let answers: Vec<&str> = d.answers.iter().map(|a| a.data.as_str()).collect();
                let ttls: Vec<String> = d.answers.iter().map(|a| a.ttl.to_string()).collect();
                vec![
                    s(&d.qname),
                    n(Some(d.qtype as u64)),
                    Cell::Str(Some(d.qtype_name().to_string())),
                    n(Some(d.qclass as u64)),
                    n(answered.then_some(d.rcode as u64)),
                    Cell::Str(answered.then(|| d.rcode_name().to_string())),
                    n(Some(d.id as u64)),
                    s(&answers.join(",")),
                    s(&ttls.join(",")),
                    Cell::Bool(d.aa),
                    Cell::Bool(d.tc),
                    Cell::Bool(d.rd),
                    Cell::Bool(d.ra),
                ]
            }
        };
        TxRow {
            ts_ns: tx.ts_ns(),
            uid: r.uid.as_str().to_string(),
            client: r.orig_h,
            client_port: r.orig_p,
            server: r.resp_h,
            server_port: r.resp_p,
            transport: if r.transport == Proto::Udp { 17 } else { 6 },
            status: tx.status.as_str(),
            request_bytes: tx.request.map(|x| x.bytes),
            response_bytes: tx.response.map(|x| x.bytes),
            latency_ns: tx.latency_ns(),
            first_byte_latency_ns: tx.first_byte_latency_ns(),
            extra,
        }
    }
}
