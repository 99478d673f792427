//! A tiny pcap / pcapng walker for the tests: reads the shared captures in
//! place so that tests use real packets without copying files into the repo.
//! It trusts its input (these are known-good files) and panics otherwise.

use crate::LinkType;

pub struct TestPacket {
    pub ts_ns: i64,
    pub linktype: LinkType,
    pub data: Vec<u8>,
}

/// Absolute path of a file under `shared/testdata/`.
pub fn path(rel: &str) -> String {
    format!("{}/../../../shared/testdata/{}", env!("CARGO_MANIFEST_DIR"), rel)
}

/// All packets of a pcap or pcapng file under `shared/testdata/`.
pub fn read(rel: &str) -> Vec<TestPacket> {
    let d = std::fs::read(path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if d[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        read_pcapng(&d)
    } else {
        read_pcap(&d)
    }
}

fn read_pcap(d: &[u8]) -> Vec<TestPacket> {
    let magic = u32::from_le_bytes(d[..4].try_into().unwrap());
    let (le, nano) = match magic {
        0xa1b2c3d4 => (true, false),
        0xa1b23c4d => (true, true),
        0xd4c3b2a1 => (false, false),
        0x4d3cb2a1 => (false, true),
        m => panic!("bad pcap magic {m:08x}"),
    };
    let u32_at = |o: usize| {
        let b: [u8; 4] = d[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let linktype = LinkType(u32_at(20) & 0x0fff_ffff);
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= d.len() {
        let (sec, frac, cap) = (u32_at(off) as i64, u32_at(off + 4) as i64, u32_at(off + 8) as usize);
        let ts_ns = sec * 1_000_000_000 + if nano { frac } else { frac * 1000 };
        off += 16;
        let end = (off + cap).min(d.len());
        out.push(TestPacket { ts_ns, linktype, data: d[off..end].to_vec() });
        off = end;
    }
    out
}

fn read_pcapng(d: &[u8]) -> Vec<TestPacket> {
    let mut out = Vec::new();
    let mut le = true;
    let mut ifaces: Vec<(LinkType, i64)> = Vec::new();
    let mut off = 0;
    while off + 12 <= d.len() {
        let raw = |o: usize| -> [u8; 4] { d[o..o + 4].try_into().unwrap() };
        if raw(off) == [0x0a, 0x0d, 0x0d, 0x0a] {
            le = raw(off + 8) == [0x4d, 0x3c, 0x2b, 0x1a];
            ifaces.clear();
        }
        let u32_at = |o: usize| if le { u32::from_le_bytes(raw(o)) } else { u32::from_be_bytes(raw(o)) };
        let u16_at = |o: usize| {
            let b: [u8; 2] = d[o..o + 2].try_into().unwrap();
            if le {
                u16::from_le_bytes(b)
            } else {
                u16::from_be_bytes(b)
            }
        };
        let (ty, len) = (u32_at(off), u32_at(off + 4) as usize);
        assert!(len >= 12 && off + len <= d.len(), "bad pcapng block");
        let body = off + 8;
        match ty {
            1 => {
                // Interface description: find if_tsresol among the options.
                let mut res = 1_000i64; // default microseconds, in ns per tick
                let mut o = body + 8;
                while o + 4 <= off + len - 4 {
                    let (code, olen) = (u16_at(o), u16_at(o + 2) as usize);
                    if code == 0 {
                        break;
                    }
                    if code == 9 {
                        let v = d[o + 4];
                        res = if v & 0x80 == 0 { 10i64.pow(9u32.saturating_sub(v as u32)) } else { 1 };
                    }
                    o += 4 + ((olen + 3) & !3);
                }
                ifaces.push((LinkType(u16_at(body) as u32), res));
            }
            6 => {
                let if_id = u32_at(body) as usize;
                let ts = (u64::from(u32_at(body + 4)) << 32) | u64::from(u32_at(body + 8));
                let cap = u32_at(body + 12) as usize;
                let (linktype, res) = ifaces[if_id];
                let data = d[body + 20..body + 20 + cap].to_vec();
                out.push(TestPacket { ts_ns: ts as i64 * res, linktype, data });
            }
            3 => {
                let cap = (len - 16).min(u32_at(body) as usize);
                let (linktype, _) = ifaces[0];
                out.push(TestPacket { ts_ns: 0, linktype, data: d[body + 4..body + 4 + cap].to_vec() });
            }
            _ => {}
        }
        off += len;
    }
    out
}
