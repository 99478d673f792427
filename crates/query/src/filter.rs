//! The `--where` expression compiled against the batch layout: each condition
//! becomes a loop over one typed column slice that writes a selection bitmap
//! (64 rows per word), and `and`/`or`/`not` combine bitmaps word by word.
//!
//! Nothing here allocates per row, and no row is turned into a dynamic value:
//! a port test is a loop over `&[u16]`, a CIDR test a mask-and-compare over
//! `&[[u8; 16]]` read as `u128`. The column's variant is matched once per batch
//! and the comparison operator once per column, so each inner loop is
//! monomorphic and the compiler can vectorize it.

use wirelog_store::{Batch, Column};

use crate::error::{SchemaError, SchemaProblem};
use crate::expr::{CmpOp, Expr, Operand, Test};
use crate::value::Net;

/// Sets of up to this many values are searched linearly, larger ones by
/// binary search.
const LINEAR_MAX: usize = 8;

#[derive(Debug)]
enum Node {
    Leaf(Leaf),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

#[derive(Debug)]
struct Leaf {
    col: &'static str,
    /// The second column of a sum operand (`bytes`, `pkts`).
    col2: Option<&'static str>,
    test: LTest,
    /// Holds the per-row sum for sum operands; reused across batches.
    sum: Vec<u64>,
}

#[derive(Debug)]
enum LTest {
    UCmp(CmpOp, u64),
    /// Sorted, deduplicated.
    USet(Vec<u64>),
    ICmp(CmpOp, i64),
    ISet(Vec<i64>),
    Net(NetTest),
    /// Sorted, deduplicated.
    StrIn(Vec<String>),
    StrMatch {
        pat: String,
        start: bool,
        end: bool,
    },
    Bool(bool),
}

#[derive(Debug)]
struct NetTest {
    /// (mask, network) pairs, tested in turn.
    nets: Vec<(u128, u128)>,
    /// Single addresses when there are many of them: sorted, binary-searched.
    hosts: Vec<u128>,
}

impl NetTest {
    fn new(nets: &[Net]) -> NetTest {
        let n_hosts = nets.iter().filter(|n| n.prefix == 128).count();
        let mut t = NetTest {
            nets: Vec::new(),
            hosts: Vec::new(),
        };
        for n in nets {
            if n.prefix == 128 && n_hosts > LINEAR_MAX {
                t.hosts.push(n.base());
            } else {
                t.nets.push((n.mask(), n.base()));
            }
        }
        t.hosts.sort_unstable();
        t.hosts.dedup();
        t.nets.sort_unstable();
        t.nets.dedup();
        t
    }

    #[inline]
    fn contains(&self, a: u128) -> bool {
        self.nets.iter().any(|&(m, b)| a & m == b)
            || (!self.hosts.is_empty() && self.hosts.binary_search(&a).is_ok())
    }
}

/// Writes one bit per element of `src` into `out` (bit `i % 64` of word
/// `i / 64`); bits past the end stay 0.
#[inline(always)]
fn fill<T>(src: &[T], out: &mut [u64], f: impl Fn(&T) -> bool) {
    let mut chunks = src.chunks_exact(64);
    let mut words = out.iter_mut();
    for (chunk, w) in (&mut chunks).zip(&mut words) {
        let mut bits = 0u64;
        for (j, x) in chunk.iter().enumerate() {
            bits |= (f(x) as u64) << j;
        }
        *w = bits;
    }
    let rem = chunks.remainder();
    if let Some(w) = words.next() {
        let mut bits = 0u64;
        for (j, x) in rem.iter().enumerate() {
            bits |= (f(x) as u64) << j;
        }
        *w = bits;
    }
}

/// `fill` with the operator matched once, outside the loop.
#[inline(always)]
fn fill_cmp<T: Copy, V: PartialOrd + Copy>(
    src: &[T],
    out: &mut [u64],
    op: CmpOp,
    v: V,
    conv: impl Fn(T) -> Option<V>,
) {
    match op {
        CmpOp::Eq => fill(src, out, |&x| conv(x).is_some_and(|x| x == v)),
        CmpOp::Lt => fill(src, out, |&x| conv(x).is_some_and(|x| x < v)),
        CmpOp::Le => fill(src, out, |&x| conv(x).is_some_and(|x| x <= v)),
        CmpOp::Gt => fill(src, out, |&x| conv(x).is_some_and(|x| x > v)),
        CmpOp::Ge => fill(src, out, |&x| conv(x).is_some_and(|x| x >= v)),
    }
}

fn set_contains<T: Ord + Copy>(set: &[T], x: T) -> bool {
    if set.len() <= LINEAR_MAX {
        set.contains(&x)
    } else {
        set.binary_search(&x).is_ok()
    }
}

fn wrong(col: &'static str) -> SchemaError {
    SchemaError {
        column: col,
        problem: SchemaProblem::WrongType,
    }
}

/// Looks a column up and checks its length.
pub(crate) fn column<'b>(batch: &'b Batch, name: &'static str) -> Result<&'b Column, SchemaError> {
    let c = batch.column(name).ok_or(SchemaError {
        column: name,
        problem: SchemaProblem::Missing,
    })?;
    if c.len() != batch.rows() {
        return Err(SchemaError {
            column: name,
            problem: SchemaProblem::Length,
        });
    }
    Ok(c)
}

/// Adds `col` into `acc` (unset values count 0), for sum operands.
fn add_into(acc: &mut [u64], col: &Column, name: &'static str) -> Result<(), SchemaError> {
    fn add<T: Copy>(acc: &mut [u64], src: &[T], f: impl Fn(T) -> u64) {
        for (a, &x) in acc.iter_mut().zip(src) {
            *a = a.saturating_add(f(x));
        }
    }
    match col {
        Column::U8(v) => add(acc, v, |x| x as u64),
        Column::U16(v) => add(acc, v, |x| x as u64),
        Column::U32(v) => add(acc, v, |x| x as u64),
        Column::U64(v) => add(acc, v, |x| x),
        Column::OptU64(v) => add(acc, v, |x| x.unwrap_or(0)),
        _ => return Err(wrong(name)),
    }
    Ok(())
}

/// String equality with the lengths compared first: most values of a
/// column differ from a pattern in length (or are empty, as unset owners
/// are), and a `memcmp` call per row then costs more than the test.
#[inline]
fn same_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a.as_bytes() == b.as_bytes())
}

impl Leaf {
    fn eval(&mut self, batch: &Batch, out: &mut [u64]) -> Result<(), SchemaError> {
        let col = column(batch, self.col)?;
        if let Some(col2) = self.col2 {
            let c2 = column(batch, col2)?;
            self.sum.clear();
            self.sum.resize(batch.rows(), 0);
            add_into(&mut self.sum, col, self.col)?;
            add_into(&mut self.sum, c2, col2)?;
            let s = self.sum.as_slice();
            match &self.test {
                LTest::UCmp(op, v) => fill_cmp(s, out, *op, *v, Some),
                LTest::USet(set) => fill(s, out, |&x| set_contains(set, x)),
                _ => return Err(wrong(self.col)),
            }
            return Ok(());
        }
        self.eval_col(col, out)
    }

    fn eval_col(&self, col: &Column, out: &mut [u64]) -> Result<(), SchemaError> {
        let name = self.col;
        match (&self.test, col) {
            (LTest::UCmp(op, v), Column::U8(s)) => fill_cmp(s, out, *op, *v, |x| Some(x as u64)),
            (LTest::UCmp(op, v), Column::U16(s)) => fill_cmp(s, out, *op, *v, |x| Some(x as u64)),
            (LTest::UCmp(op, v), Column::U32(s)) => fill_cmp(s, out, *op, *v, |x| Some(x as u64)),
            (LTest::UCmp(op, v), Column::U64(s)) => fill_cmp(s, out, *op, *v, Some),
            (LTest::UCmp(op, v), Column::OptU64(s)) => fill_cmp(s, out, *op, *v, |x| x),
            (LTest::USet(set), Column::U8(s)) => fill(s, out, |&x| set_contains(set, x as u64)),
            (LTest::USet(set), Column::U16(s)) => fill(s, out, |&x| set_contains(set, x as u64)),
            (LTest::USet(set), Column::U32(s)) => fill(s, out, |&x| set_contains(set, x as u64)),
            (LTest::USet(set), Column::U64(s)) => fill(s, out, |&x| set_contains(set, x)),
            (LTest::USet(set), Column::OptU64(s)) => {
                fill(s, out, |&x| x.is_some_and(|x| set_contains(set, x)))
            }
            (LTest::ICmp(op, v), Column::I64(s)) => fill_cmp(s, out, *op, *v, Some),
            (LTest::ICmp(op, v), Column::OptI64(s)) => fill_cmp(s, out, *op, *v, |x| x),
            (LTest::ISet(set), Column::I64(s)) => fill(s, out, |&x| set_contains(set, x)),
            (LTest::ISet(set), Column::OptI64(s)) => {
                fill(s, out, |&x| x.is_some_and(|x| set_contains(set, x)))
            }
            (LTest::Net(t), Column::Ip(s)) => {
                if let ([(m, b)], []) = (t.nets.as_slice(), t.hosts.as_slice()) {
                    let (m, b) = (*m, *b);
                    fill(s, out, |&a| u128::from_be_bytes(a) & m == b)
                } else {
                    fill(s, out, |&a| t.contains(u128::from_be_bytes(a)))
                }
            }
            (LTest::StrIn(set), Column::Str(s)) => {
                if let [one] = set.as_slice() {
                    if one.is_empty() {
                        // `field = ""` / `!= ""` (the map's owner questions,
                        // the failures' `last_alert != ""`): a length test,
                        // not a `memcmp` call of 0 bytes per row.
                        fill(s.as_slice(), out, |x: &String| x.is_empty())
                    } else {
                        fill(s.as_slice(), out, |x: &String| same_str(x, one))
                    }
                } else if set.len() <= LINEAR_MAX {
                    fill(s.as_slice(), out, |x: &String| set.iter().any(|v| same_str(x, v)))
                } else {
                    fill(s.as_slice(), out, |x: &String| {
                        set.binary_search_by(|v| v.as_str().cmp(x)).is_ok()
                    })
                }
            }
            (LTest::StrMatch { pat, start, end }, Column::Str(s)) => {
                let p = pat.as_str();
                match (start, end) {
                    (true, true) => fill(s.as_slice(), out, |x: &String| same_str(x, p)),
                    (true, false) => fill(s.as_slice(), out, |x: &String| x.starts_with(p)),
                    (false, true) => fill(s.as_slice(), out, |x: &String| x.ends_with(p)),
                    (false, false) => fill(s.as_slice(), out, |x: &String| x.contains(p)),
                }
            }
            (LTest::Bool(b), Column::Bool(s)) => fill(s, out, |&x| x == *b),
            _ => return Err(wrong(name)),
        }
        Ok(())
    }
}

fn cost(n: &Node) -> u32 {
    match n {
        Node::Leaf(l) => match (&l.test, l.col2) {
            (_, Some(_)) => 4,
            (LTest::StrIn(_) | LTest::StrMatch { .. }, _) => 8,
            (LTest::Net(_), _) => 2,
            _ => 1,
        },
        Node::Not(c) => cost(c),
        Node::And(cs) | Node::Or(cs) => cs.iter().map(cost).sum(),
    }
}

fn depth(n: &Node) -> usize {
    match n {
        Node::Leaf(_) => 0,
        Node::Not(c) => depth(c),
        Node::And(cs) | Node::Or(cs) => 1 + cs.iter().map(depth).max().unwrap_or(0),
    }
}

fn compile(e: &Expr) -> Node {
    match e {
        Expr::Pred(p) => {
            let (col, col2) = match p.operand {
                Operand::Field(f) => (f.name(), None),
                Operand::Sum(a, b) => (a.name(), Some(b.name())),
            };
            let test = match &p.test {
                Test::UInt(op, v) => LTest::UCmp(*op, *v),
                Test::UIntIn(vs) => {
                    let mut vs = vs.clone();
                    vs.sort_unstable();
                    vs.dedup();
                    LTest::USet(vs)
                }
                Test::Int(op, v) => LTest::ICmp(*op, *v),
                Test::IntIn(vs) => {
                    let mut vs = vs.clone();
                    vs.sort_unstable();
                    vs.dedup();
                    LTest::ISet(vs)
                }
                Test::Net(nets) => LTest::Net(NetTest::new(nets)),
                Test::StrIn(ss) => {
                    let mut ss = ss.clone();
                    ss.sort_unstable();
                    ss.dedup();
                    LTest::StrIn(ss)
                }
                Test::StrMatch { pat, start, end } => LTest::StrMatch {
                    pat: pat.clone(),
                    start: *start,
                    end: *end,
                },
                Test::Bool(b) => LTest::Bool(*b),
            };
            Node::Leaf(Leaf {
                col,
                col2,
                test,
                sum: Vec::new(),
            })
        }
        Expr::Not(inner) => match compile(inner) {
            Node::Not(x) => *x,
            n => Node::Not(Box::new(n)),
        },
        Expr::And(es) | Expr::Or(es) => {
            let and = matches!(e, Expr::And(_));
            let mut kids = Vec::new();
            for c in es {
                match (compile(c), and) {
                    (Node::And(gk), true) => kids.extend(gk),
                    (Node::Or(gk), false) => kids.extend(gk),
                    (n, _) => kids.push(n),
                }
            }
            // Cheap tests first: a later one is skipped once the bitmap is
            // settled (all 0 for `and`, all 1 for `or`).
            kids.sort_by_key(cost);
            if and {
                Node::And(kids)
            } else {
                Node::Or(kids)
            }
        }
    }
}

/// A compiled filter, reusable across batches.
#[derive(Debug)]
pub(crate) struct Filter {
    root: Node,
    /// One bitmap per nesting level of `and`/`or`.
    scratch: Vec<Vec<u64>>,
}

impl Filter {
    pub(crate) fn new(e: &Expr) -> Filter {
        let root = compile(e);
        let scratch = (0..depth(&root)).map(|_| Vec::new()).collect();
        Filter { root, scratch }
    }

    /// Evaluates the filter over `batch` into `out`: one bit per row, bits
    /// past the last row 0.
    pub(crate) fn eval(&mut self, batch: &Batch, out: &mut Vec<u64>) -> Result<(), SchemaError> {
        let n = batch.rows();
        let words = n.div_ceil(64);
        out.clear();
        out.resize(words, 0);
        for s in &mut self.scratch {
            s.clear();
            s.resize(words, 0);
        }
        eval(&mut self.root, batch, n, out, &mut self.scratch)
    }
}

// `n % 64`: `is_multiple_of` is newer than the workspace's rust-version.
#[allow(clippy::manual_is_multiple_of)]
fn tail_mask(n: usize) -> u64 {
    if n % 64 == 0 {
        u64::MAX
    } else {
        (1u64 << (n % 64)) - 1
    }
}

fn eval(
    node: &mut Node,
    batch: &Batch,
    n: usize,
    out: &mut [u64],
    scratch: &mut [Vec<u64>],
) -> Result<(), SchemaError> {
    match node {
        Node::Leaf(l) => l.eval(batch, out),
        Node::Not(c) => {
            eval(c, batch, n, out, scratch)?;
            for w in out.iter_mut() {
                *w = !*w;
            }
            if let Some(last) = out.last_mut() {
                *last &= tail_mask(n);
            }
            Ok(())
        }
        Node::And(kids) => combine(kids, true, batch, n, out, scratch),
        Node::Or(kids) => combine(kids, false, batch, n, out, scratch),
    }
}

/// `and` (or `or`) of the children into `out`, using `scratch[0]` for each
/// later child's bitmap and the rest of `scratch` for deeper levels.
fn combine(
    kids: &mut [Node],
    and: bool,
    batch: &Batch,
    n: usize,
    out: &mut [u64],
    scratch: &mut [Vec<u64>],
) -> Result<(), SchemaError> {
    let (mine, deeper) = scratch.split_first_mut().expect("scratch sized by depth");
    let (first, rest) = kids.split_first_mut().expect("and/or has children");
    eval(first, batch, n, out, deeper)?;
    let last = out.len().saturating_sub(1);
    for k in rest {
        let settled = if and {
            out.iter().all(|&w| w == 0)
        } else {
            out.iter()
                .enumerate()
                .all(|(i, &w)| w == if i == last { tail_mask(n) } else { u64::MAX })
        };
        if settled {
            break;
        }
        eval(k, batch, n, mine, deeper)?;
        if and {
            out.iter_mut().zip(mine.iter()).for_each(|(o, m)| *o &= m);
        } else {
            out.iter_mut().zip(mine.iter()).for_each(|(o, m)| *o |= m);
        }
    }
    Ok(())
}

/// The row indices whose bit is set.
pub(crate) fn selected(bitmap: &[u64], out: &mut Vec<u32>) {
    out.clear();
    for (wi, &w) in bitmap.iter().enumerate() {
        let mut w = w;
        let base = (wi * 64) as u32;
        while w != 0 {
            out.push(base + w.trailing_zeros());
            w &= w - 1;
        }
    }
}
