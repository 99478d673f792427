//! What a DNS transaction records (filled in by `wirelog_parse::dns`), and
//! the names Zeek gives the numbers in it.

/// One resource record, rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsAnswer {
    pub name: String,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    /// Record data as text (address, name, `TXT <len> <text>`...).
    pub data: String,
}

/// EDNS(0) OPT pseudo-record of the response (else of the query).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Edns {
    pub udp_size: u16,
    /// Upper 8 bits of the extended rcode (full rcode = ext << 4 | header rcode).
    pub ext_rcode: u8,
    pub version: u8,
    pub dnssec_ok: bool,
}

/// The facts kept per DNS transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DnsTx {
    pub id: u16,
    pub opcode: u8,
    /// Header flags of the response (of the query when there is none).
    pub qr: bool,
    pub aa: bool,
    pub tc: bool,
    pub rd: bool,
    pub ra: bool,
    pub z: bool,
    pub ad: bool,
    pub cd: bool,
    /// First question (lower-case not forced; as sent, without the final dot).
    pub qname: String,
    pub qtype: u16,
    pub qclass: u16,
    /// Response code (with the EDNS extension when present); 0 without response.
    pub rcode: u16,
    pub answers: Vec<DnsAnswer>,
    pub authorities: Vec<DnsAnswer>,
    /// Counts from the response header (summed over the messages of a zone transfer).
    pub answer_count: u32,
    pub authority_count: u32,
    pub additional_count: u32,
    pub edns: Option<Edns>,
    /// Response messages merged into this transaction (more than one for AXFR/IXFR over TCP).
    pub response_messages: u32,
}

impl DnsTx {
    pub fn qtype_name(&self) -> &'static str {
        type_name(self.qtype)
    }
    pub fn qclass_name(&self) -> &'static str {
        class_name(self.qclass)
    }
    pub fn rcode_name(&self) -> &'static str {
        rcode_name(self.rcode)
    }
    pub fn opcode_name(&self) -> &'static str {
        opcode_name(self.opcode)
    }
    /// TTLs of the answers, in order.
    pub fn ttls(&self) -> impl Iterator<Item = u32> + '_ {
        self.answers.iter().map(|a| a.ttl)
    }
}

pub fn type_name(t: u16) -> &'static str {
    match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        13 => "HINFO",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        39 => "DNAME",
        41 => "OPT",
        43 => "DS",
        46 => "RRSIG",
        47 => "NSEC",
        48 => "DNSKEY",
        50 => "NSEC3",
        51 => "NSEC3PARAM",
        52 => "TLSA",
        64 => "SVCB",
        65 => "HTTPS",
        99 => "SPF",
        251 => "IXFR",
        252 => "AXFR",
        255 => "*",
        257 => "CAA",
        _ => "unknown",
    }
}

pub fn class_name(c: u16) -> &'static str {
    match c {
        1 => "C_INTERNET",
        3 => "C_CHAOS",
        4 => "C_HESIOD",
        254 => "C_NONE",
        255 => "C_ANY",
        _ => "unknown",
    }
}

pub fn rcode_name(r: u16) -> &'static str {
    match r {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        16 => "BADVERS",
        _ => "unknown",
    }
}

pub fn opcode_name(o: u8) -> &'static str {
    match o {
        0 => "query",
        1 => "iquery",
        2 => "status",
        4 => "notify",
        5 => "update",
        _ => "unknown",
    }
}

use crate::columns::{Card::*, Column as C, Columns, Item, LogText, Type::*, Unit, Val};
use crate::{get, num_item, text_item};

const NUM: crate::columns::Type = Count { bits: 64, unit: Unit::Plain };

fn answered(r: &crate::TxRecord) -> bool {
    r.tx.response.is_some()
}

/// DNS's columns, in dns.log's order (Zeek's).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::log_only("proto", Enum, "Transport (udp, tcp).", |r| Val::Text(Some(r.transport.as_str()))),
        C::new("trans_id", NUM, High, "Transaction id of the query.", get!(Dns, |r, d| Val::Count(Some(d.id as u64)))).aliases(&["id"]).fits(16),
        C::log_only("rtt", Interval, "Query to response.", |r| Val::Interval(r.tx.latency_ns())),
        C::new("query", Text, Mid, "The question's name (first question).", get!(Dns, |r, d| Val::text(&d.qname)))
            .aliases(&["qname", "name"])
            .brief(),
        C::new("qclass", NUM, Low, "The question's class.", get!(Dns, |r, d| Val::Count(Some(d.qclass as u64)))).fits(16),
        C::log_only("qclass_name", Text, "The question's class by name.", get!(Dns, |r, d| Val::Text(Some(d.qclass_name())))),
        C::new("qtype", NUM, Low, "The question's type.", get!(Dns, |r, d| Val::Count(Some(d.qtype as u64)))).fits(16),
        C::new("qtype_name", Text, Low, "The question's type by name (A, AAAA).", get!(Dns, |r, d| Val::Text(Some(d.qtype_name()))))
            .aliases(&["type"])
            .brief(),
        C::new("rcode", NUM, Low, "Response code (with EDNS's extension).", get!(Dns, |r, d| Val::Count(answered(r).then_some(d.rcode as u64)))).fits(16),
        C::new("rcode_name", Text, Low, "Response code by name (NOERROR, NXDOMAIN).", get!(Dns, |r, d| Val::Text(answered(r).then(|| d.rcode_name())))).brief(),
        C::new("aa", Bool, Low, "Authoritative answer flag.", get!(Dns, |r, d| Val::Bool(Some(d.aa)))).log_as("AA"),
        C::new("tc", Bool, Low, "Truncation flag.", get!(Dns, |r, d| Val::Bool(Some(d.tc)))).log_as("TC"),
        C::new("rd", Bool, Low, "Recursion desired flag.", get!(Dns, |r, d| Val::Bool(Some(d.rd)))).log_as("RD"),
        C::new("ra", Bool, Low, "Recursion available flag.", get!(Dns, |r, d| Val::Bool(Some(d.ra)))).log_as("RA"),
        C::log_only("Z", NUM, "The reserved header bit.", get!(Dns, |r, d| Val::Count(Some(d.z as u64)))),
        C::new("answers", List(Item::Text), High, "The answers' data (addresses, names).", get!(Dns, |r, d| Val::texts(r, d.answers.len(), text_item!(Dns, |d, i| &d.answers[i].data)))).brief(),
        C::new("ttls", List(Item::Secs), High, "The answers' TTLs, seconds.", get!(Dns, |r, d| Val::nums(r, d.answers.len(), num_item!(Dns, |d, i| u64::from(d.answers[i].ttl)))))
        .log_as("TTLs"),
        C::log_only("answer_names", List(Item::Text), "The answers' owner names.", get!(Dns, |r, d| Val::texts(r, d.answers.len(), text_item!(Dns, |d, i| &d.answers[i].name)))),
        C::log_only("answer_types", List(Item::Text), "The answers' types by name.", get!(Dns, |r, d| Val::texts(r, d.answers.len(), text_item!(Dns, |d, i| type_name(d.answers[i].rtype))))),
        C::log_only("authority_count", NUM, "Authority records in the response.", get!(Dns, |r, d| Val::Count(answered(r).then_some(d.authority_count as u64)))),
        C::log_only("edns_udp_size", NUM, "EDNS(0) UDP payload size.", get!(Dns, |r, d| Val::Count(d.edns.map(|e| e.udp_size as u64)))),
        C::log_only("edns_version", NUM, "EDNS version.", get!(Dns, |r, d| Val::Count(d.edns.map(|e| e.version as u64)))),
        C::log_only("edns_do", Bool, "EDNS DNSSEC OK bit.", get!(Dns, |r, d| Val::Bool(d.edns.map(|e| e.dnssec_ok)))),
        C::log_only("opcode_name", Text, "Opcode by name (query, notify).", get!(Dns, |r, d| Val::Text(Some(d.opcode_name())))),
    ],
    store_order: &["query", "qtype", "qtype_name", "qclass", "rcode", "rcode_name", "trans_id", "answers", "ttls", "aa", "tc", "rd", "ra"],
    by: &["query", "qtype_name"],
    shape: &["query", "qtype_name"],
    renamed: &[],
    log_text: LogText::Utf8,
};
