//! The `--where` language: a lexer that keeps each token's column, and a
//! recursive-descent parser that type-checks values against the field as it
//! goes, so an error can point at the exact token and say what was expected.
//!
//! Grammar (EBNF; keywords are case-insensitive):
//!
//! ```text
//! expr      = and_expr , { ( "or" | "||" ) , and_expr } ;
//! and_expr  = unary , { ( "and" | "&&" ) , unary } ;
//! unary     = ( "not" | "!" ) , unary | primary ;
//! primary   = "(" , expr , ")" | condition ;
//! condition = field , op , value
//!           | field , [ "not" ] , "in" , ( value | "(" , value , { "," , value } , ")" ) ;
//! op        = "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "~" | "!~" ;
//! field     = word ;                       (* a column, an alias, or host|net|port|bytes|pkts *)
//! value     = word | quoted ;
//! word      = { any character except white space and ( ) , " ' = ! < > ~ & | } ;
//! quoted    = '"' , { char | '\"' | '\\' } , '"' | "'" , { char } , "'" ;
//! ```

use wirelog_store::Kind;

use crate::error::QueryError;
use crate::expr::{CmpOp, Expr, Operand, Pred, Test};
use crate::field::{Field, Ty, Unit};
use crate::time::{parse_duration, parse_time};
use crate::value::{parse_bool, parse_net, parse_uint, NetError};

const FLAG: &str = "--where";
/// The values of a connection's `proto` text column.
const CONN_PROTOS: &[&str] = &["tcp", "udp", "icmp"];

/// Deeper nesting is refused rather than risking the stack.
const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Match,
    NotMatch,
    In,
    NotIn,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    LParen,
    RParen,
    Comma,
    Op(Op),
    AndSym,
    OrSym,
    Bang,
    /// A character no token starts with (a lone `&` or `|`).
    Bad(char),
    End,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// 1-based character column.
    col: usize,
    /// The token as typed, for messages.
    text: String,
}

fn is_word_char(c: char) -> bool {
    !(c.is_whitespace() || "(),\"'=!<>~&|".contains(c))
}

fn lex(input: &str) -> Result<Vec<Token>, QueryError> {
    let chars: Vec<char> = input.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            (',', _) => (Tok::Comma, 1),
            ('=', Some('=')) => (Tok::Op(Op::Eq), 2),
            ('=', _) => (Tok::Op(Op::Eq), 1),
            ('!', Some('=')) => (Tok::Op(Op::Ne), 2),
            ('!', Some('~')) => (Tok::Op(Op::NotMatch), 2),
            ('!', _) => (Tok::Bang, 1),
            ('<', Some('=')) => (Tok::Op(Op::Le), 2),
            ('<', Some('>')) => (Tok::Op(Op::Ne), 2),
            ('<', _) => (Tok::Op(Op::Lt), 1),
            ('>', Some('=')) => (Tok::Op(Op::Ge), 2),
            ('>', _) => (Tok::Op(Op::Gt), 1),
            ('~', _) => (Tok::Op(Op::Match), 1),
            ('&', Some('&')) => (Tok::AndSym, 2),
            ('|', Some('|')) => (Tok::OrSym, 2),
            ('&' | '|', _) => (Tok::Bad(c), 1),
            ('"' | '\'', _) => {
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => {
                            return Err(QueryError::new(
                                FLAG,
                                input,
                                col,
                                format!("a closing {c} for the string that starts here"),
                                "end of input",
                            ))
                        }
                        Some(&q) if q == c => break,
                        // Backslash escapes only in double quotes; single quotes are raw.
                        Some('\\') if c == '"' && j + 1 < chars.len() => {
                            s.push(chars[j + 1]);
                            j += 2;
                        }
                        Some(&other) => {
                            s.push(other);
                            j += 1;
                        }
                    }
                }
                let len = j + 1 - i;
                (Tok::Quoted(s), len)
            }
            _ => {
                let mut j = i;
                while j < chars.len() && is_word_char(chars[j]) {
                    j += 1;
                }
                (Tok::Word(chars[i..j].iter().collect()), j - i)
            }
        };
        toks.push(Token {
            tok,
            col,
            text: chars[i..i + len].iter().collect(),
        });
        i += len;
    }
    toks.push(Token {
        tok: Tok::End,
        col: chars.len() + 1,
        text: String::new(),
    });
    Ok(toks)
}

fn keyword(t: &Tok, kw: &str) -> bool {
    matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
}

fn describe(t: &Token) -> String {
    match t.tok {
        Tok::End => "end of input".to_string(),
        _ => format!("'{}'", t.text),
    }
}

/// What a field name resolves to: a column, or one of the names that cover
/// two columns.
#[derive(Debug, Clone, Copy)]
enum Target {
    Field(Field),
    /// Either address (`host`, `net`).
    EitherIp(Field, Field),
    /// Either port (`port` on connections).
    EitherPort(Field, Field),
    /// `bytes`, `pkts`: out + in.
    Sum(Field, Field),
    /// Connections' `proto`: names compare the `proto` text, numbers `ip_proto`.
    ConnProto,
}

const PSEUDO: &[&str] = &["host", "net", "addr", "port", "bytes", "pkts", "packets"];

/// Names covering two columns of transactions. `host` is one of them except
/// for HTTP, where it is the Host header: `ip` works for every kind.
const TX_PSEUDO: &[&str] = &["ip", "host", "net", "addr", "port", "bytes"];

fn resolve(kind: Kind, name: &str) -> Option<Target> {
    let lower = name.to_ascii_lowercase();
    let col = |n| Field::col(kind, n);
    let flows = kind == Kind::Flows;
    if kind == Kind::X509 || kind == Kind::Loss {
        // Certificates and loss rows have no addresses, ports or packet
        // pairs (`packets` is the loss table's own column): their columns only.
        return Field::lookup(kind, &lower).map(Target::Field);
    }
    if kind.is_tx() {
        // A real column first (http's `host`).
        if let Some(f) = Field::lookup(kind, &lower) {
            return Some(Target::Field(f));
        }
        return Some(match lower.as_str() {
            "ip" | "host" | "net" | "addr" => Target::EitherIp(col("client"), col("server")),
            "port" => Target::EitherPort(col("client_port"), col("server_port")),
            "bytes" => Target::Sum(col("request_bytes"), col("response_bytes")),
            _ => return None,
        });
    }
    Some(match lower.as_str() {
        "host" | "net" | "addr" if flows => Target::EitherIp(col("client"), col("server")),
        "host" | "net" | "addr" => Target::EitherIp(col("orig_h"), col("resp_h")),
        "port" if flows => Target::Field(col("server_port")),
        "port" => Target::EitherPort(col("orig_p"), col("resp_p")),
        "bytes" if flows => Target::Sum(col("bytes_out"), col("bytes_in")),
        "bytes" => Target::Sum(col("orig_bytes"), col("resp_bytes")),
        "pkts" | "packets" if flows => Target::Sum(col("pkts_out"), col("pkts_in")),
        "pkts" | "packets" => Target::Sum(col("orig_pkts"), col("resp_pkts")),
        "proto" if !flows => Target::ConnProto,
        _ => Target::Field(Field::lookup(kind, &lower)?),
    })
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != cb) as usize)
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest known name, when it is close enough to be a typo.
pub(crate) fn suggest(kind: Kind, name: &str, extra: &[&'static str]) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    Field::all_names(kind)
        .chain(extra.iter().copied())
        .map(|n| (edit_distance(&lower, n), n))
        .filter(|&(d, n)| d <= 2 && d < n.len())
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

pub(crate) fn unknown_field(
    kind: Kind,
    flag: &'static str,
    input: &str,
    col: usize,
    name: &str,
    extra: &[&'static str],
) -> QueryError {
    let expected = match kind.protocol() {
        None if kind == Kind::Flows => "a flow field name".to_string(),
        None if kind == Kind::X509 => "a certificate field name".to_string(),
        None => "a connection field name".to_string(),
        Some(p) => {
            // Said as letters ("aitch-tee-tee-pee") or as a word ("redis").
            let article = if p.name().starts_with(['a', 'e', 'i', 'o', 'u']) || p.name() == "http" { "an" } else { "a" };
            format!("{article} {} field name", p.name())
        }
    };
    let mut message = format!("expected {expected}, found unknown field '{name}'");
    match suggest(kind, name, extra) {
        Some(s) => message.push_str(&format!(" (did you mean '{s}'?)")),
        None => {
            let names: Vec<&str> = Field::all(kind).map(Field::name).collect();
            message.push_str(&format!(" (fields: {})", names.join(", ")));
        }
    }
    QueryError::custom(flag, input, col, expected, message)
}

/// A value as typed, with where it was.
struct Val {
    text: String,
    col: usize,
}

struct Parser<'a> {
    kind: Kind,
    input: &'a str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Parses a `--where` expression for records of `kind`.
pub fn parse_where(kind: Kind, input: &str) -> Result<Expr, QueryError> {
    let toks = lex(input)?;
    let mut p = Parser {
        kind,
        input,
        toks,
        pos: 0,
        depth: 0,
    };
    let e = p.or_expr(None)?;
    let t = p.peek();
    if t.tok != Tok::End {
        let expected = if t.tok == Tok::RParen {
            "'and', 'or' or end of input ('(' missing for this ')')"
        } else {
            "'and', 'or' or end of input"
        };
        return Err(p.err(t.col, expected, &describe(t)));
    }
    Ok(e)
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Token {
        &self.toks[self.pos]
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if t.tok != Tok::End {
            self.pos += 1;
        }
        t
    }

    fn err(&self, col: usize, expected: impl Into<String>, found: &str) -> QueryError {
        QueryError::new(FLAG, self.input, col, expected, found)
    }

    fn enter(&mut self, col: usize) -> Result<(), QueryError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(QueryError::custom(
                FLAG,
                self.input,
                col,
                "fewer nested parentheses or 'not's",
                format!("expression nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    /// `after` names the token that demanded a condition, for the message.
    fn or_expr(&mut self, after: Option<&str>) -> Result<Expr, QueryError> {
        let mut parts = vec![self.and_expr(after)?];
        loop {
            let t = self.peek();
            if t.tok == Tok::OrSym || keyword(&t.tok, "or") {
                let kw = self.bump().text;
                parts.push(self.and_expr(Some(&kw))?);
            } else {
                break;
            }
        }
        Ok(if parts.len() == 1 {
            parts.pop().unwrap()
        } else {
            Expr::Or(parts)
        })
    }

    fn and_expr(&mut self, after: Option<&str>) -> Result<Expr, QueryError> {
        let mut parts = vec![self.unary(after)?];
        loop {
            let t = self.peek();
            if t.tok == Tok::AndSym || keyword(&t.tok, "and") {
                let kw = self.bump().text;
                parts.push(self.unary(Some(&kw))?);
            } else {
                break;
            }
        }
        Ok(if parts.len() == 1 {
            parts.pop().unwrap()
        } else {
            Expr::And(parts)
        })
    }

    fn unary(&mut self, after: Option<&str>) -> Result<Expr, QueryError> {
        let t = self.peek();
        if t.tok == Tok::Bang || keyword(&t.tok, "not") {
            let t = self.bump();
            self.enter(t.col)?;
            let inner = self.unary(Some(&t.text))?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary(after)
    }

    fn primary(&mut self, after: Option<&str>) -> Result<Expr, QueryError> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::LParen => {
                self.bump();
                self.enter(t.col)?;
                let e = self.or_expr(Some("("))?;
                self.depth -= 1;
                let close = self.peek();
                if close.tok != Tok::RParen {
                    let expected =
                        format!("')' to close the '(' at column {}, or 'and'/'or'", t.col);
                    return Err(self.err(close.col, expected, &describe(close)));
                }
                self.bump();
                Ok(e)
            }
            Tok::Word(w)
                if !["and", "or", "in"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k)) =>
            {
                self.condition()
            }
            _ => {
                let expected = match after {
                    Some(a) => format!("a condition after '{a}'"),
                    None => "a condition (a field name, 'not' or '(')".to_string(),
                };
                Err(self.err(t.col, expected, &describe(&t)))
            }
        }
    }

    fn condition(&mut self) -> Result<Expr, QueryError> {
        let name_tok = self.bump();
        let Tok::Word(name) = &name_tok.tok else {
            unreachable!("primary checked for a word")
        };
        let target = resolve(self.kind, name).ok_or_else(|| {
            let pseudo = if self.kind.is_tx() { TX_PSEUDO } else { PSEUDO };
            unknown_field(self.kind, FLAG, self.input, name_tok.col, name, pseudo)
        })?;

        let op_tok = self.bump();
        let op = match &op_tok.tok {
            Tok::Op(op) => *op,
            Tok::Word(w) if w.eq_ignore_ascii_case("in") => Op::In,
            Tok::Word(w) if w.eq_ignore_ascii_case("not") && keyword(&self.peek().tok, "in") => {
                self.bump();
                Op::NotIn
            }
            _ => {
                let expected =
                    format!("an operator (=, !=, <, <=, >, >=, ~, !~, in) after '{name}'");
                return Err(self.err(op_tok.col, expected, &describe(&op_tok)));
            }
        };
        let op_text = if op == Op::NotIn {
            "not in".to_string()
        } else {
            op_tok.text.clone()
        };

        let mut vals = Vec::new();
        if matches!(op, Op::In | Op::NotIn) && self.peek().tok == Tok::LParen {
            let open = self.bump();
            loop {
                vals.push(self.value(&op_text)?);
                let t = self.bump();
                match t.tok {
                    Tok::Comma => continue,
                    Tok::RParen => break,
                    _ => {
                        let expected =
                            format!("',' or ')' to close the list opened at column {}", open.col);
                        return Err(self.err(t.col, expected, &describe(&t)));
                    }
                }
            }
        } else {
            vals.push(self.value(&op_text)?);
        }
        self.lower(name, target, op, &op_text, op_tok.col, &vals)
    }

    fn value(&mut self, after: &str) -> Result<Val, QueryError> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Word(w) | Tok::Quoted(w) => {
                self.bump();
                Ok(Val {
                    text: w,
                    col: t.col,
                })
            }
            _ => Err(self.err(t.col, format!("a value after '{after}'"), &describe(&t))),
        }
    }

    /// Turns `target op values` into a typed expression.
    fn lower(
        &self,
        name: &str,
        target: Target,
        op: Op,
        op_text: &str,
        op_col: usize,
        vals: &[Val],
    ) -> Result<Expr, QueryError> {
        let negate = matches!(op, Op::Ne | Op::NotMatch | Op::NotIn);
        let pos = match op {
            Op::Ne | Op::In | Op::NotIn => Op::Eq,
            Op::NotMatch => Op::Match,
            o => o,
        };
        let e = match target {
            Target::Field(f) => self.positive(name, Operand::Field(f), pos, op_text, op_col, vals)?,
            Target::Sum(a, b) => self.positive(name, Operand::Sum(a, b), pos, op_text, op_col, vals)?,
            Target::EitherIp(a, b) | Target::EitherPort(a, b) => Expr::Or(vec![
                self.positive(name, Operand::Field(a), pos, op_text, op_col, vals)?,
                self.positive(name, Operand::Field(b), pos, op_text, op_col, vals)?,
            ]),
            Target::ConnProto => self.conn_proto(name, pos, op_text, op_col, vals)?,
        };
        Ok(if negate { Expr::Not(Box::new(e)) } else { e })
    }

    /// `proto` on connections: names (`tcp`) compare Zeek's text column, numbers
    /// compare `ip_proto`; a list may mix both.
    fn conn_proto(
        &self,
        name: &str,
        op: Op,
        op_text: &str,
        op_col: usize,
        vals: &[Val],
    ) -> Result<Expr, QueryError> {
        let text = Operand::Field(Field::col(self.kind, "proto"));
        let number = Operand::Field(Field::col(self.kind, "ip_proto"));
        let numeric = |v: &Val| !v.text.is_empty() && v.text.bytes().all(|b| b.is_ascii_digit());
        match op {
            Op::Match => self.positive(name, text, op, op_text, op_col, vals),
            Op::Eq => {
                let names: Vec<Val> = vals
                    .iter()
                    .filter(|v| !numeric(v))
                    .map(|v| Val {
                        text: v.text.to_ascii_lowercase(),
                        col: v.col,
                    })
                    .collect();
                // The names Zeek's `proto` column holds (wirelog_record's
                // `Proto::as_str`): any other name would match nothing.
                if let Some(v) = names.iter().find(|v| !CONN_PROTOS.contains(&v.text.as_str())) {
                    let orig = vals.iter().find(|o| o.col == v.col).unwrap_or(v);
                    return Err(self.type_err(name, orig, "tcp, udp, icmp or a protocol number (0-255)"));
                }
                let nums: Vec<Val> = vals
                    .iter()
                    .filter(|v| numeric(v))
                    .map(|v| Val {
                        text: v.text.clone(),
                        col: v.col,
                    })
                    .collect();
                let mut parts = Vec::new();
                if !names.is_empty() {
                    parts.push(self.positive(name, text, op, op_text, op_col, &names)?);
                }
                if !nums.is_empty() {
                    parts.push(self.positive(name, number, op, op_text, op_col, &nums)?);
                }
                Ok(if parts.len() == 1 {
                    parts.pop().unwrap()
                } else {
                    Expr::Or(parts)
                })
            }
            _ => self.positive(name, number, op, op_text, op_col, vals),
        }
    }

    /// The un-negated test: `op` is `Eq` (one value or a list), `Match`, or an
    /// ordering.
    fn positive(
        &self,
        name: &str,
        operand: Operand,
        op: Op,
        op_text: &str,
        op_col: usize,
        vals: &[Val],
    ) -> Result<Expr, QueryError> {
        let ty = operand.ty();
        let cmp = match op {
            Op::Eq => Some(CmpOp::Eq),
            Op::Lt => Some(CmpOp::Lt),
            Op::Le => Some(CmpOp::Le),
            Op::Gt => Some(CmpOp::Gt),
            Op::Ge => Some(CmpOp::Ge),
            _ => None,
        };
        let bad_op = |allowed: &str, what: &str| {
            QueryError::custom(
                FLAG,
                self.input,
                op_col,
                allowed.to_string(),
                format!("expected {allowed} for {what}, found '{op_text}'"),
            )
        };
        let test = match ty {
            Ty::UInt { bits, unit } => {
                let Some(cmp) = cmp else {
                    return Err(bad_op("=, !=, <, <=, >, >= or in", "a number"));
                };
                let expected = match unit {
                    Unit::Plain if bits == 16 && (name.contains("port") || name.ends_with("_p")) => {
                        "a port number (0-65535)".to_string()
                    }
                    Unit::Plain => format!("a number (0-{})", u64::MAX >> (64 - bits)),
                    Unit::Proto => {
                        "a protocol name (tcp, udp, icmp, ...) or number (0-255)".to_string()
                    }
                    Unit::Bytes => "a byte count (e.g. 1500, 10k, 5MB, 2GiB)".to_string(),
                    Unit::Count => "a count (e.g. 100, 12k, 3M)".to_string(),
                };
                let nums = self.each(name, vals, &expected, |s| parse_uint(s, unit, bits))?;
                if nums.len() == 1 {
                    Test::UInt(cmp, nums[0])
                } else {
                    Test::UIntIn(nums)
                }
            }
            Ty::Time | Ty::Duration => {
                let Some(cmp) = cmp else {
                    return Err(bad_op("=, !=, <, <=, >, >= or in", "a time or duration"));
                };
                let nums = if ty == Ty::Time {
                    self.each(
                        name,
                        vals,
                        "a time (2024-05-01T12:00:00Z, 2024-05-01 or Unix seconds)",
                        parse_time,
                    )?
                } else {
                    self.each(
                        name,
                        vals,
                        "a duration (e.g. 500ms, 1.5s, 2m; a bare number is seconds)",
                        |s| parse_duration(s, true),
                    )?
                };
                if nums.len() == 1 {
                    Test::Int(cmp, nums[0])
                } else {
                    Test::IntIn(nums)
                }
            }
            Ty::Ip => {
                if op != Op::Eq {
                    return Err(bad_op("=, !=, in or not in", "an address"));
                }
                let mut nets = Vec::with_capacity(vals.len());
                for v in vals {
                    match parse_net(&v.text) {
                        Ok(n) => nets.push(n),
                        Err(NetError::Address) => {
                            return Err(self.type_err(
                                name,
                                v,
                                "an IP address or CIDR (e.g. 10.0.0.0/8, 2001:db8::/32)",
                            ))
                        }
                        Err(NetError::Prefix(max)) => {
                            let slash = v
                                .text
                                .find('/')
                                .map_or(0, |i| v.text[..i].chars().count() + 1);
                            return Err(self.err(
                                v.col + slash,
                                format!("a prefix length 0-{max}"),
                                &format!("'{}'", &v.text[v.text.find('/').map_or(0, |i| i + 1)..]),
                            ));
                        }
                    }
                }
                Test::Net(nets)
            }
            Ty::Str => match op {
                Op::Eq => Test::StrIn(vals.iter().map(|v| v.text.clone()).collect()),
                Op::Match => {
                    let s = &vals[0].text;
                    let start = s.starts_with('^');
                    let rest = if start { &s[1..] } else { &s[..] };
                    let end = rest.ends_with('$');
                    let pat = if end { &rest[..rest.len() - 1] } else { rest };
                    Test::StrMatch {
                        pat: pat.to_string(),
                        start,
                        end,
                    }
                }
                _ => return Err(bad_op("=, !=, ~, !~, in or not in", "text")),
            },
            Ty::Bool => {
                if op != Op::Eq || vals.len() != 1 {
                    return Err(bad_op("= or !=", "a true/false field"));
                }
                Test::Bool(self.each(name, vals, "true or false", parse_bool)?[0])
            }
        };
        Ok(Expr::Pred(Pred { operand, test }))
    }

    fn each<T>(
        &self,
        name: &str,
        vals: &[Val],
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, QueryError> {
        vals.iter()
            .map(|v| parse(&v.text).ok_or_else(|| self.type_err(name, v, expected)))
            .collect()
    }

    /// A value that does not fit its field: the message names the field as
    /// typed and its type ("status_code is a number (0-65535), found 'abc'").
    fn type_err(&self, name: &str, v: &Val, expected: &str) -> QueryError {
        QueryError::custom(
            FLAG,
            self.input,
            v.col,
            expected,
            format!("{name} is {expected}, found '{}'", v.text),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::v4;

    fn flows(s: &str) -> Expr {
        parse_where(Kind::Flows, s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn conns(s: &str) -> Expr {
        parse_where(Kind::Conns, s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn text(kind: Kind, s: &str) -> String {
        parse_where(kind, s)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    #[test]
    fn every_operator() {
        let k = Kind::Flows;
        assert_eq!(text(k, "dport = 443"), "server_port = 443");
        assert_eq!(text(k, "dport == 443"), "server_port = 443");
        assert_eq!(text(k, "dport != 443"), "not server_port = 443");
        assert_eq!(text(k, "dport <> 443"), "not server_port = 443");
        assert_eq!(text(k, "dport < 1024"), "server_port < 1024");
        assert_eq!(text(k, "dport <= 1024"), "server_port <= 1024");
        assert_eq!(text(k, "dport > 1024"), "server_port > 1024");
        assert_eq!(text(k, "dport >= 1024"), "server_port >= 1024");
        assert_eq!(
            text(k, "dport in (80, 443,8080)"),
            "server_port in (80, 443, 8080)"
        );
        assert_eq!(
            text(k, "dport not in (80, 443)"),
            "not server_port in (80, 443)"
        );
        assert_eq!(text(k, "dport in 443"), "server_port = 443");
        assert_eq!(text(k, "iface ~ eth"), "iface ~ \"eth\"");
        assert_eq!(text(k, "iface !~ '^eth'"), "not iface ~ \"^eth\"");
        assert_eq!(text(k, "iface = \"a b\\\"c\""), "iface = \"a b\\\"c\"");
        assert_eq!(text(Kind::Conns, "local_orig = T"), "local_orig = true");
        assert_eq!(
            text(Kind::Conns, "local_orig != false"),
            "not local_orig = false"
        );
    }

    #[test]
    fn precedence_and_grouping() {
        let k = Kind::Flows;
        assert_eq!(
            text(k, "dport = 1 or dport = 2 and proto = tcp"),
            "server_port = 1 or (server_port = 2 and proto = tcp)"
        );
        assert_eq!(
            text(k, "(dport = 1 or dport = 2) and proto = tcp"),
            "(server_port = 1 or server_port = 2) and proto = tcp"
        );
        assert_eq!(
            text(k, "dport = 1 AND dport = 2 And dport = 3"),
            "server_port = 1 and server_port = 2 and server_port = 3"
        );
        assert_eq!(
            text(k, "dport = 1 || dport = 2 && dport = 3"),
            "server_port = 1 or (server_port = 2 and server_port = 3)"
        );
        assert_eq!(
            text(k, "not dport = 1 and dport = 2"),
            "not server_port = 1 and server_port = 2"
        );
        assert_eq!(
            text(k, "not (dport = 1 and dport = 2)"),
            "not (server_port = 1 and server_port = 2)"
        );
        assert_eq!(text(k, "!dport = 1"), "not server_port = 1");
        assert_eq!(text(k, "not not dport = 1"), "not not server_port = 1");
        assert_eq!(text(k, "((dport = 1))"), "server_port = 1");
        assert_eq!(
            text(k, "dport=1 and(dport=2 or(dport=3))"),
            "server_port = 1 and (server_port = 2 or server_port = 3)"
        );
    }

    #[test]
    fn addresses_and_networks() {
        let e = flows("sip in 10.0.0.0/8");
        let Expr::Pred(Pred {
            operand: Operand::Field(f),
            test: Test::Net(nets),
        }) = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(f.name(), "client");
        assert_eq!(nets.len(), 1);
        assert!(nets[0].contains(&v4(10, 9, 8, 7)));
        assert_eq!(
            text(Kind::Flows, "dip = 192.168.1.1"),
            "server = 192.168.1.1"
        );
        assert_eq!(
            text(Kind::Flows, "dip = 192.168.0.0/16"),
            "server = 192.168.0.0/16"
        );
        assert_eq!(
            text(Kind::Flows, "sip in (10.0.0.0/8, 2001:db8::/32, ::1)"),
            "client in (10.0.0.0/8, 2001:db8::/32, ::1)"
        );
        assert_eq!(
            text(Kind::Flows, "host = 10.0.0.1"),
            "client = 10.0.0.1 or server = 10.0.0.1"
        );
        assert_eq!(
            text(Kind::Flows, "net = 10.0.0.0/8"),
            "client = 10.0.0.0/8 or server = 10.0.0.0/8"
        );
        assert_eq!(
            text(Kind::Flows, "host != 10.0.0.1"),
            "not (client = 10.0.0.1 or server = 10.0.0.1)"
        );
        assert_eq!(
            text(Kind::Conns, "host = fe80::1"),
            "orig_h = fe80::1 or resp_h = fe80::1"
        );
        assert_eq!(
            text(Kind::Conns, "id.orig_h in fe80::/10"),
            "orig_h = fe80::/10"
        );
        assert_eq!(
            text(Kind::Conns, "sip in ::ffff:10.0.0.0/104"),
            "orig_h = 10.0.0.0/8"
        );
    }

    #[test]
    fn values_by_field() {
        assert_eq!(text(Kind::Flows, "proto = udp"), "proto = udp");
        assert_eq!(text(Kind::Flows, "proto = 17"), "proto = udp");
        assert_eq!(text(Kind::Flows, "bytes > 10k"), "bytes > 10000");
        assert_eq!(
            text(Kind::Flows, "bytes_out >= 5MB"),
            "bytes_out >= 5000000"
        );
        assert_eq!(text(Kind::Flows, "pkts < 12k"), "pkts < 12000");
        assert_eq!(
            text(Kind::Flows, "time >= 2024-05-01T12:00:00Z"),
            "bucket >= 2024-05-01T12:00:00Z"
        );
        assert_eq!(
            text(Kind::Flows, "first < 1714564800"),
            "first < 2024-05-01T12:00:00Z"
        );
        assert_eq!(text(Kind::Conns, "duration > 500ms"), "duration > 500ms");
        assert_eq!(text(Kind::Conns, "duration > 2"), "duration > 2s");
        assert_eq!(text(Kind::Conns, "proto = tcp"), "proto = \"tcp\"");
        assert_eq!(text(Kind::Conns, "proto = TCP"), "proto = \"tcp\"");
        assert_eq!(text(Kind::Conns, "proto = 6"), "ip_proto = tcp");
        assert_eq!(
            text(Kind::Conns, "proto in (udp, 6)"),
            "proto = \"udp\" or ip_proto = tcp"
        );
        assert_eq!(text(Kind::Conns, "port = 53"), "orig_p = 53 or resp_p = 53");
        assert_eq!(text(Kind::Flows, "port = 53"), "server_port = 53");
        assert_eq!(text(Kind::Conns, "history ~ \"^Sh\""), "history ~ \"^Sh\"");
        assert_eq!(text(Kind::Conns, "history ~ d$"), "history ~ \"d$\"");
        assert_eq!(text(Kind::Conns, "service = \"\""), "service = \"\"");
        assert_eq!(
            text(Kind::Conns, "conn_state in (SF, S0)"),
            "conn_state in (\"SF\", \"S0\")"
        );
        assert_eq!(
            text(Kind::Conns, "orig_bytes > 1KiB and vlan = 10"),
            "orig_bytes > 1024 and vlan = 10"
        );
        assert_eq!(
            text(Kind::Conns, "dport = 443 and sport > 1024"),
            "resp_p = 443 and orig_p > 1024"
        );
        let Expr::Pred(p) = conns("bytes > 1") else {
            panic!()
        };
        assert!(
            matches!(p.operand, Operand::Sum(a, b) if a.name() == "orig_bytes" && b.name() == "resp_bytes")
        );
    }

    #[test]
    fn display_round_trips() {
        for (k, s) in [
            (Kind::Flows, "(dport = 1 or not sip in (10.0.0.0/8, ::1)) and iface ~ \"^e\\\"th$\" and time < 2024-05-01T12:00:00.5Z"),
            (Kind::Conns, "not (duration >= 1h30m or proto in (tcp, 17)) and history !~ Sh and local_resp = false"),
            (Kind::Conns, "bytes in (1, 2, 3) and pkts > 5 and ts in (1, 2)"),
        ] {
            let e = parse_where(k, s).unwrap();
            let again = parse_where(k, &e.to_string()).unwrap();
            assert_eq!(e, again, "{e}");
        }
    }

    /// (input, column, expected fragment)
    fn bad(kind: Kind, input: &str, column: usize, expected: &str) {
        let e = parse_where(kind, input).expect_err(input);
        assert_eq!(e.column, column, "column for {input:?}: {e}");
        assert!(
            e.expected.contains(expected),
            "expected {expected:?} for {input:?}, got {e}"
        );
        // The caret lands under the reported column.
        let caret_line = e.to_string().lines().nth(2).unwrap().to_string();
        assert_eq!(caret_line.len(), 2 + column, "{e}");
    }

    #[test]
    fn errors_point_at_the_column() {
        let f = Kind::Flows;
        bad(f, "", 1, "a condition");
        bad(f, "dport = ", 9, "a value after '='");
        bad(f, "dport = 443 and", 16, "a condition after 'and'");
        bad(f, "dport = 443 or ", 16, "a condition after 'or'");
        bad(f, "dprt = 443", 1, "field name");
        bad(f, "dport = abc", 9, "a port number (0-65535)");
        bad(f, "dport = 70000", 9, "a port number");
        let e = parse_where(Kind::Http, "status_code >= abc").unwrap_err().to_string();
        assert!(e.contains("status_code is a number (0-65535), found 'abc'"), "{e}");
        let e = parse_where(Kind::Conns, "duration > soon").unwrap_err().to_string();
        assert!(e.contains("duration is a duration"), "{e}");
        let e = parse_where(Kind::Flows, "sip = nowhere").unwrap_err().to_string();
        assert!(e.contains("sip is an IP address or CIDR"), "{e}");
        bad(f, "(dport = 443", 13, "')' to close the '(' at column 1");
        bad(f, "dport = 443)", 12, "end of input");
        bad(f, "sip = 10.0.0.256", 7, "an IP address or CIDR");
        bad(f, "sip in 10.0.0.0/33", 17, "a prefix length 0-32");
        bad(f, "sip in (1.2.3.4, ::/200)", 21, "a prefix length 0-128");
        bad(f, "sip < 10.0.0.1", 5, "=, !=, in or not in");
        bad(f, "iface > eth0", 7, "=, !=, ~, !~, in or not in");
        bad(f, "dport ~ 44", 7, "=, !=, <, <=, >, >= or in");
        bad(f, "dport in (80, 443", 18, "',' or ')'");
        bad(f, "dport in ()", 11, "a value after 'in'");
        bad(f, "dport in (80 443)", 14, "',' or ')'");
        bad(f, "bytes > 10XB", 9, "a byte count");
        bad(f, "iface = \"eth0", 9, "a closing \"");
        bad(f, "dport 443", 7, "an operator");
        bad(f, "and dport = 1", 1, "a condition");
        bad(
            f,
            "dport = 1 & dport = 2",
            11,
            "'and', 'or' or end of input",
        );
        bad(
            f,
            "dport = 1 and (proto = tcp or)",
            30,
            "a condition after 'or'",
        );
        bad(f, "not", 4, "a condition after 'not'");
        bad(f, "proto = ftp", 9, "a protocol name");
        bad(Kind::Conns, "proto = nosuchproto", 9, "tcp, udp, icmp or a protocol number (0-255)");
        bad(Kind::Conns, "proto in (udp, NoSuch)", 16, "tcp, udp, icmp");
        bad(Kind::Conns, "proto = 300", 9, "a protocol name");
        bad(Kind::Dns, "qtype = 99999999", 9, "a number (0-65535)");
        bad(Kind::Dns, "qclass = 65536", 10, "a number (0-65535)");
        bad(f, "time > yesterday", 8, "a time");
        bad(Kind::Conns, "duration > 5parsec", 12, "a duration");
        bad(Kind::Conns, "local_orig = maybe", 14, "true or false");
        bad(Kind::Conns, "history < x", 9, "=, !=, ~");
        bad(Kind::Conns, "flows = 1", 1, "connection field name");
        // Columns count characters, not bytes.
        bad(f, "iface = \"é\" and dport = x", 25, "a port number");
    }

    #[test]
    fn error_text() {
        let e = parse_where(Kind::Flows, "dport = 443 and").unwrap_err();
        assert_eq!(
            e.to_string(),
            "error in --where at column 16: expected a condition after 'and', found end of input\n  dport = 443 and\n                 ^"
        );
        let e = parse_where(Kind::Flows, "dprt = 443").unwrap_err();
        assert!(e.message.contains("did you mean 'dport'?"), "{e}");
        let e = parse_where(Kind::Flows, "zzzzzz = 1").unwrap_err();
        assert!(e.message.contains("fields: bucket, iface"), "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let s = format!("{}dport = 1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse_where(Kind::Flows, &s).is_err());
        let s = format!("{}dport = 1", "not ".repeat(10_000));
        assert!(parse_where(Kind::Flows, &s).is_err());
        let s = format!("{}dport = 1{}", "(".repeat(50), ")".repeat(50));
        assert!(parse_where(Kind::Flows, &s).is_ok());
    }
}
