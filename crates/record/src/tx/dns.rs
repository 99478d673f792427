//! What a DNS transaction records (filled in by `wirelog_parse::dns`), and
//! the names Zeek gives the numbers in it.

use crate::SmallText;

/// One resource record, rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsAnswer {
    /// Owner name; the question's (a copy in place, or the same `Arc`) when
    /// it repeats it, as most answers do.
    pub name: SmallText,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    /// Record data as text (address, name, `TXT <len> <text>`...).
    pub data: SmallText,
}

/// A response's answers: none or one kept in place, more in a vector
/// (`Vec` allocated for every answered query). Reads as a slice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answers(AnswersRepr);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum AnswersRepr {
    #[default]
    Empty,
    One(DnsAnswer),
    Many(Vec<DnsAnswer>),
}

impl Answers {
    pub fn push(&mut self, a: DnsAnswer) {
        self.0 = match std::mem::take(&mut self.0) {
            AnswersRepr::Empty => AnswersRepr::One(a),
            AnswersRepr::One(first) => AnswersRepr::Many(vec![first, a]),
            AnswersRepr::Many(mut v) => {
                v.push(a);
                AnswersRepr::Many(v)
            }
        };
    }

    pub fn into_vec(self) -> Vec<DnsAnswer> {
        match self.0 {
            AnswersRepr::Empty => Vec::new(),
            AnswersRepr::One(a) => vec![a],
            AnswersRepr::Many(v) => v,
        }
    }
}

impl std::ops::Deref for Answers {
    type Target = [DnsAnswer];
    fn deref(&self) -> &[DnsAnswer] {
        match &self.0 {
            AnswersRepr::Empty => &[],
            AnswersRepr::One(a) => std::slice::from_ref(a),
            AnswersRepr::Many(v) => v,
        }
    }
}

impl Extend<DnsAnswer> for Answers {
    fn extend<I: IntoIterator<Item = DnsAnswer>>(&mut self, it: I) {
        for a in it {
            self.push(a);
        }
    }
}

impl IntoIterator for Answers {
    type Item = DnsAnswer;
    type IntoIter = std::vec::IntoIter<DnsAnswer>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl From<Vec<DnsAnswer>> for Answers {
    fn from(v: Vec<DnsAnswer>) -> Self {
        let mut a = Answers::default();
        a.extend(v);
        a
    }
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
    pub qname: SmallText,
    pub qtype: u16,
    pub qclass: u16,
    /// Response code (with the EDNS extension when present); 0 without response.
    pub rcode: u16,
    /// The answers; the first is kept in place (most responses have one),
    /// so that a transaction allocates no vector for it.
    pub answers: Answers,
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
        C::new("answers", List(Item::Text), High, "The answers' data (addresses, names).", get!(Dns, |r, d| Val::texts(r, d.answers.len(), text_item!(Dns, |d, i| d.answers[i].data.as_str())))).brief(),
        C::new("ttls", List(Item::Secs), High, "The answers' TTLs, seconds.", get!(Dns, |r, d| Val::nums(r, d.answers.len(), num_item!(Dns, |d, i| u64::from(d.answers[i].ttl)))))
        .log_as("TTLs"),
        C::log_only("answer_names", List(Item::Text), "The answers' owner names.", get!(Dns, |r, d| Val::texts(r, d.answers.len(), text_item!(Dns, |d, i| d.answers[i].name.as_str())))),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn a(ttl: u32) -> DnsAnswer {
        DnsAnswer { name: "a.example".into(), rtype: 1, class: 1, ttl, data: "192.0.2.1".into() }
    }

    #[test]
    fn answers_keep_the_first_in_place_and_read_as_a_slice() {
        let mut v = Answers::default();
        assert!(v.is_empty());
        for n in 1..=3 {
            v.push(a(n));
            assert_eq!(v.len(), n as usize);
            assert_eq!(v.iter().map(|x| x.ttl).collect::<Vec<_>>(), (1..=n).collect::<Vec<_>>());
        }
        assert!(matches!(Answers::from(vec![a(1)]).0, AnswersRepr::One(_)));
        assert_eq!(Answers::from(vec![a(1), a(2), a(3)]), v);
        assert_eq!(v.clone().into_iter().map(|x| x.ttl).collect::<Vec<_>>(), [1, 2, 3]);
        let mut w = Answers::from(vec![a(1)]);
        w.extend(vec![a(2), a(3)]);
        assert_eq!(w, v);
        assert_eq!(Answers::default().into_vec(), Vec::new());
    }
}
