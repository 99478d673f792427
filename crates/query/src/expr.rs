//! The filter's syntax tree, after parsing and type checking: every value is
//! already in its column's representation (ns, 16-byte addresses, numbers), so
//! compiling it to a vectorized filter needs no more parsing.
//!
//! `!=`, `!~` and `not in` are not operators here: the parser turns them into
//! `Not` of `=`, `~` and `in`, so a row with an unset value (Zeek's `-`)
//! matches `orig_bytes != 5` exactly when it does not match `orig_bytes = 5`.

use std::fmt;

use crate::field::{proto_name, Field, Ty, Unit};
use crate::time::{format_duration_exact, format_rfc3339};
use crate::value::Net;

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Pred(Pred),
    Not(Box<Expr>),
    /// All must hold (at least two children after parsing).
    And(Vec<Expr>),
    /// One must hold.
    Or(Vec<Expr>),
}

/// One condition on one value of a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Pred {
    pub operand: Operand,
    pub test: Test,
}

/// What a condition reads from a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Field(Field),
    /// The sum of two unsigned columns, an unset value counting as 0:
    /// `bytes` (out + in) and `pkts`.
    Sum(Field, Field),
}

impl Operand {
    pub fn ty(self) -> Ty {
        match self {
            Operand::Field(f) => f.ty(),
            Operand::Sum(a, _) => a.ty(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Operand::Field(f) => f.name(),
            Operand::Sum(a, _) => match a.ty() {
                Ty::UInt { unit: Unit::Bytes, .. } => "bytes",
                _ => "pkts",
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    #[inline]
    pub fn eval<T: PartialOrd>(self, x: T, v: T) -> bool {
        match self {
            CmpOp::Eq => x == v,
            CmpOp::Lt => x < v,
            CmpOp::Le => x <= v,
            CmpOp::Gt => x > v,
            CmpOp::Ge => x >= v,
        }
    }
}

/// The test a condition applies; the variant follows the operand's type.
/// An unset value (`OptU64`/`OptI64` `None`) passes none of them.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Unsigned columns (ports, counters, protocol numbers, VLANs).
    UInt(CmpOp, u64),
    UIntIn(Vec<u64>),
    /// Times and durations, in ns.
    Int(CmpOp, i64),
    IntIn(Vec<i64>),
    /// The address lies in one of the blocks (a plain address is a /128).
    Net(Vec<Net>),
    /// The text equals one of these.
    StrIn(Vec<String>),
    /// The text contains `pat`; `start`/`end` anchor it (`~ "^Sh"`, `~ "d$"`).
    StrMatch {
        pat: String,
        start: bool,
        end: bool,
    },
    Bool(bool),
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn uint_text(ty: Ty, v: u64) -> String {
    match ty {
        Ty::UInt { unit: Unit::Proto, .. } => proto_name(v as u8).map_or_else(|| v.to_string(), str::to_string),
        _ => v.to_string(),
    }
}

fn int_text(ty: Ty, v: i64) -> String {
    match ty {
        Ty::Time => format_rfc3339(v),
        _ if v < 0 => format!("{v}ns"),
        _ => format_duration_exact(v),
    }
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    if items.len() == 1 {
        return format!("= {}", f(&items[0]));
    }
    let parts: Vec<String> = items.iter().map(f).collect();
    format!("in ({})", parts.join(", "))
}

/// The canonical text of a condition; it parses back to the same `Pred`.
impl fmt::Display for Pred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ty = self.operand.ty();
        let name = self.operand.name();
        let rest = match &self.test {
            Test::UInt(op, v) => format!("{} {}", op.as_str(), uint_text(ty, *v)),
            Test::UIntIn(vs) => list(vs, |v| uint_text(ty, *v)),
            Test::Int(op, v) => format!("{} {}", op.as_str(), int_text(ty, *v)),
            Test::IntIn(vs) => list(vs, |v| int_text(ty, *v)),
            Test::Net(nets) => list(nets, |n| n.to_string()),
            Test::StrIn(ss) => list(ss, |s| quote(s)),
            Test::StrMatch { pat, start, end } => {
                format!(
                    "~ {}",
                    quote(&format!("{}{pat}{}", if *start { "^" } else { "" }, if *end { "$" } else { "" }))
                )
            }
            Test::Bool(b) => format!("= {b}"),
        };
        write!(f, "{name} {rest}")
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn child(e: &Expr, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match e {
                Expr::And(_) | Expr::Or(_) => write!(f, "({e})"),
                _ => write!(f, "{e}"),
            }
        }
        match self {
            Expr::Pred(p) => write!(f, "{p}"),
            Expr::Not(e) => {
                f.write_str("not ")?;
                child(e, f)
            }
            Expr::And(es) | Expr::Or(es) => {
                let sep = if matches!(self, Expr::And(_)) { " and " } else { " or " };
                for (i, e) in es.iter().enumerate() {
                    if i > 0 {
                        f.write_str(sep)?;
                    }
                    child(e, f)?;
                }
                Ok(())
            }
        }
    }
}

impl Expr {
    /// Every field the expression reads.
    pub fn fields(&self, out: &mut Vec<Field>) {
        match self {
            Expr::Pred(p) => match p.operand {
                Operand::Field(f) => out.push(f),
                Operand::Sum(a, b) => out.extend([a, b]),
            },
            Expr::Not(e) => e.fields(out),
            Expr::And(es) | Expr::Or(es) => es.iter().for_each(|e| e.fields(out)),
        }
    }
}
