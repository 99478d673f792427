//! Mysql: placeholder until the parser lands.

use crate::{Dir, ParseConfig, ParseStats, StreamParser, Transaction};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MysqlTx {}

pub struct MysqlParser {
    stats: ParseStats,
}

impl MysqlParser {
    pub fn new(_cfg: &ParseConfig) -> Self {
        MysqlParser { stats: ParseStats::default() }
    }
}

/// True when `data`, the first bytes seen in `dir`, look like this protocol.
pub fn looks_like(_dir: Dir, _data: &[u8]) -> bool {
    false
}

impl StreamParser for MysqlParser {
    fn data(&mut self, _dir: Dir, _ts_ns: i64, data: &[u8], _out: &mut Vec<Transaction>) {
        self.stats.unparsed_bytes += data.len() as u64;
    }
    fn gap(&mut self, _dir: Dir, _ts_ns: i64, _len: u64, _out: &mut Vec<Transaction>) {
        self.stats.gaps += 1;
    }
    fn expire(&mut self, _now_ns: i64, _out: &mut Vec<Transaction>) {}
    fn finish(&mut self, _ts_ns: i64, _out: &mut Vec<Transaction>) {}
    fn gave_up(&self) -> bool {
        true
    }
    fn stats(&self) -> ParseStats {
        self.stats
    }
}
