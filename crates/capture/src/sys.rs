//! Kernel ABI of AF_PACKET (linux/if_packet.h) used here, spelled out so the
//! layout is visible next to the code that reads it.

#![allow(non_camel_case_types)]

use libc::c_int;

pub const PACKET_ADD_MEMBERSHIP: c_int = 1;
pub const PACKET_RX_RING: c_int = 5;
pub const PACKET_STATISTICS: c_int = 6;
pub const PACKET_VERSION: c_int = 10;
pub const PACKET_FANOUT: c_int = 18;
pub const PACKET_IGNORE_OUTGOING: c_int = 23;
pub const PACKET_MR_PROMISC: u16 = 1;
pub const TPACKET_V3: c_int = 2;

pub const PACKET_FANOUT_HASH: u32 = 0;
pub const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;

pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// The packet is CHECKSUM_PARTIAL: its transport checksum is not filled in.
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// The NIC or the stack verified the transport checksum (received packets).
pub const TP_STATUS_CSUM_VALID: u32 = 1 << 7;

/// `sll_pkttype` values (linux/if_packet.h).
pub const PACKET_OUTGOING: u8 = 4;

pub const ARPHRD_ETHER: u16 = 1;
pub const ARPHRD_LOOPBACK: u16 = 772;

pub const ETH_P_ALL: u16 = 0x0003;
pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;

pub const SO_ATTACH_FILTER: c_int = 26;
pub const SO_LOCK_FILTER: c_int = 44;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tpacket_req3 {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
    pub tp_retire_blk_tov: u32,
    pub tp_sizeof_priv: u32,
    pub tp_feature_req_word: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tpacket_stats_v3 {
    pub tp_packets: u32,
    pub tp_drops: u32,
    pub tp_freeze_q_cnt: u32,
}

/// Header of every packet in a block (`struct tpacket3_hdr`, 48 bytes with
/// its trailing padding); the `sockaddr_ll` follows at TPACKET_ALIGN(48) = 48.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpacket3_hdr {
    pub tp_next_offset: u32,
    pub tp_sec: u32,
    pub tp_nsec: u32,
    pub tp_snaplen: u32,
    pub tp_len: u32,
    pub tp_status: u32,
    pub tp_mac: u16,
    pub tp_net: u16,
    // struct tpacket_hdr_variant1
    pub tp_rxhash: u32,
    pub tp_vlan_tci: u32,
    pub tp_vlan_tpid: u16,
    pub tp_padding: u16,
    pub tp_padding2: [u8; 8],
}

pub const TPACKET3_HDRLEN: usize = 48;

/// Ask the kernel to fill `tp_rxhash` (the flow hash fanout uses).
pub const TP_FT_REQ_FILL_RXHASH: u32 = 1;

/// `struct tpacket_block_desc` with `struct tpacket_hdr_v1` inlined.
#[repr(C)]
#[derive(Debug)]
pub struct tpacket_block_desc {
    pub version: u32,
    pub offset_to_priv: u32,
    pub block_status: u32,
    pub num_pkts: u32,
    pub offset_to_first_pkt: u32,
    pub blk_len: u32,
    pub seq_num: u64,
    pub ts_first_pkt: [u32; 2],
    pub ts_last_pkt: [u32; 2],
}

const _: () = assert!(std::mem::size_of::<tpacket3_hdr>() == TPACKET3_HDRLEN);
const _: () = assert!(std::mem::size_of::<tpacket_req3>() == 28);
const _: () = assert!(std::mem::size_of::<tpacket_block_desc>() == 48);
