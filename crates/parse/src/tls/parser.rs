//! Pure TLS wire parsing: record headers, handshake message headers, the
//! hellos, the Certificate message, and the IANA names Zeek writes. Nothing
//! here keeps state; every function takes a complete unit (a record header,
//! one handshake message body) and answers `None` when it is malformed.

/// Record content types (RFC 8446 5.1; heartbeat RFC 6520).
pub const CT_CCS: u8 = 20;
pub const CT_ALERT: u8 = 21;
pub const CT_HANDSHAKE: u8 = 22;
pub const CT_APPDATA: u8 = 23;
pub const CT_HEARTBEAT: u8 = 24;

/// Handshake message types used by the state machine.
pub const HS_CLIENT_HELLO: u8 = 1;
pub const HS_SERVER_HELLO: u8 = 2;
pub const HS_CERTIFICATE: u8 = 11;
pub const HS_SERVER_KEY_EXCHANGE: u8 = 12;
pub const HS_CLIENT_KEY_EXCHANGE: u8 = 16;
pub const HS_CERTIFICATE_STATUS: u8 = 22;

/// Extension types.
pub const EXT_SERVER_NAME: u16 = 0;
pub const EXT_SUPPORTED_GROUPS: u16 = 10;
pub const EXT_EC_POINT_FORMATS: u16 = 11;
pub const EXT_SIGNATURE_ALGORITHMS: u16 = 13;
pub const EXT_ALPN: u16 = 16;
/// RFC 6962 3.3: `signed_certificate_timestamp`, the server's SCT list.
pub const EXT_SIGNED_CERTIFICATE_TIMESTAMP: u16 = 18;
pub const EXT_SESSION_TICKET: u16 = 35;
/// key_share in TLS 1.3 drafts before 23.
pub const EXT_KEY_SHARE_OLD: u16 = 40;
pub const EXT_PRE_SHARED_KEY: u16 = 41;
pub const EXT_SUPPORTED_VERSIONS: u16 = 43;
pub const EXT_PSK_KEY_EXCHANGE_MODES: u16 = 45;
pub const EXT_KEY_SHARE: u16 = 51;
pub const EXT_CERTIFICATE_AUTHORITIES: u16 = 47;
pub const EXT_ECH: u16 = 0xfe0d;

/// Largest record body accepted: 2^14 plus the largest expansion any TLS
/// version allows (2048 for TLS <= 1.2 ciphertext).
pub const MAX_RECORD: usize = (1 << 14) + 2048;

/// The ServerHello random of a HelloRetryRequest: SHA-256("HelloRetryRequest").
pub const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// GREASE values (RFC 8701): 0x0a0a, 0x1a1a, ... 0xfafa.
#[inline]
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && (v >> 8) == (v & 0xff)
}

/// A TLS record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub content_type: u8,
    pub version: u16,
    pub len: usize,
}

/// Why a record header is not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    ContentType(u8),
    Version(u16),
    Length(usize),
}

/// Parses and checks a 5-byte record header (SSL 3.0 to TLS 1.3).
pub fn record_header(b: &[u8; 5]) -> Result<RecordHeader, RecordError> {
    let h = RecordHeader {
        content_type: b[0],
        version: u16::from_be_bytes([b[1], b[2]]),
        len: u16::from_be_bytes([b[3], b[4]]) as usize,
    };
    if !(CT_CCS..=CT_HEARTBEAT).contains(&h.content_type) {
        return Err(RecordError::ContentType(h.content_type));
    }
    if b[1] != 3 {
        return Err(RecordError::Version(h.version));
    }
    if h.len > MAX_RECORD {
        return Err(RecordError::Length(h.len));
    }
    Ok(h)
}

/// Whether `b` (at least 6 bytes) starts a TLS record that opens this
/// direction's handshake: a ClientHello from the client, a ServerHello or
/// a 2-byte alert from the server. Used to find TLS after a plaintext
/// preamble (SOCKS, STARTTLS, the MySQL/PostgreSQL SSL requests).
pub fn starts_tls(b: &[u8], client: bool) -> bool {
    if b.len() < 6 || b[1] != 3 || b[2] > 4 {
        return false;
    }
    let len = u16::from_be_bytes([b[3], b[4]]) as usize;
    match b[0] {
        CT_HANDSHAKE => {
            (1..=MAX_RECORD).contains(&len)
                && b[5]
                    == if client {
                        HS_CLIENT_HELLO
                    } else {
                        HS_SERVER_HELLO
                    }
        }
        CT_ALERT => !client && len == 2 && b[5] <= 2,
        _ => false,
    }
}

/// Whether `b` (at least 5 bytes) starts an SSLv2-format ClientHello (the
/// 2-byte header form old clients send for compatibility).
pub fn starts_sslv2_hello(b: &[u8]) -> bool {
    b.len() >= 5 && b[0] & 0x80 != 0 && b[2] == 1 && (b[3] == 0 || b[3] == 3) && b[4] <= 4
}

/// A bounds-checked big-endian reader over one message.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn u24(&mut self) -> Option<usize> {
        let b = self.bytes(3)?;
        Some(((b[0] as usize) << 16) | ((b[1] as usize) << 8) | b[2] as usize)
    }
    pub fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.bytes(n)
    }
    pub fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.bytes(n)
    }
    pub fn vec24(&mut self) -> Option<&'a [u8]> {
        let n = self.u24()?;
        self.bytes(n)
    }
}

fn u16s(b: &[u8]) -> impl Iterator<Item = u16> + '_ {
    b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// Extensions of a hello as (type, data), in wire order; `None` if the block
/// does not parse to its end.
pub fn extensions(block: &[u8]) -> Option<Vec<(u16, &[u8])>> {
    let mut r = Reader::new(block);
    let mut v = Vec::new();
    while !r.is_empty() {
        let t = r.u16()?;
        let d = r.vec16()?;
        v.push((t, d));
    }
    Some(v)
}

/// What the ClientHello says (owned: it outlives the buffered message).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// The `legacy_version` field.
    pub version: u16,
    pub session_id: Vec<u8>,
    /// Cipher suites in wire order, GREASE kept.
    pub ciphers: Vec<u16>,
    pub compression: Vec<u8>,
    /// Extension types in wire order, GREASE kept.
    pub extensions: Vec<u16>,
    pub server_name: Option<String>,
    /// ALPN protocol names in wire order (raw bytes: they need not be UTF-8).
    pub alpn: Vec<Vec<u8>>,
    pub supported_versions: Vec<u16>,
    pub groups: Vec<u16>,
    pub point_formats: Vec<u8>,
    /// Only the `signature_algorithms` extension (not `_cert`, not
    /// delegated_credentials), wire order.
    pub signature_algorithms: Vec<u16>,
    pub key_share_groups: Vec<u16>,
    /// Length of the session_ticket extension's data, if the extension is present.
    pub session_ticket_len: Option<usize>,
    pub pre_shared_key: bool,
    pub ech: bool,
    /// The outer encrypted_client_hello's HPKE KDF and AEAD ids (as Zeek's
    /// `EncryptedClientHello`, `tls-handshake-protocol.pac`: only type 0,
    /// the outer hello, carries them).
    pub ech_ids: Option<(u16, u16)>,
    /// The psk_key_exchange_modes extension's modes, if present.
    pub psk_modes: Option<Vec<u8>>,
    /// The hello came in the SSLv2 record format.
    pub sslv2: bool,
}

/// Parses a ClientHello body (after the 4-byte handshake header).
pub fn client_hello(body: &[u8]) -> Option<ClientHello> {
    let mut r = Reader::new(body);
    let mut ch = ClientHello {
        version: r.u16()?,
        ..ClientHello::default()
    };
    r.bytes(32)?;
    ch.session_id = r.vec8()?.to_vec();
    ch.ciphers = u16s(r.vec16()?).collect();
    ch.compression = r.vec8()?.to_vec();
    if r.is_empty() {
        return Some(ch); // SSL 3.0 / early TLS: no extensions block.
    }
    for (t, d) in extensions(r.vec16()?)? {
        ch.extensions.push(t);
        let mut e = Reader::new(d);
        match t {
            EXT_SERVER_NAME => {
                // The first name of host_name type (0).
                let mut list = Reader::new(e.vec16().unwrap_or(&[]));
                while let (Some(kind), Some(name)) = (list.u8(), list.vec16()) {
                    if kind == 0 && ch.server_name.is_none() {
                        ch.server_name = Some(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
            EXT_ALPN => {
                let mut list = Reader::new(e.vec16().unwrap_or(&[]));
                while let Some(p) = list.vec8() {
                    ch.alpn.push(p.to_vec());
                }
            }
            EXT_SUPPORTED_VERSIONS => {
                ch.supported_versions = u16s(e.vec8().unwrap_or(&[])).collect()
            }
            EXT_SUPPORTED_GROUPS => ch.groups = u16s(e.vec16().unwrap_or(&[])).collect(),
            EXT_EC_POINT_FORMATS => ch.point_formats = e.vec8().unwrap_or(&[]).to_vec(),
            EXT_SIGNATURE_ALGORITHMS => {
                ch.signature_algorithms = u16s(e.vec16().unwrap_or(&[])).collect()
            }
            EXT_KEY_SHARE => {
                let mut list = Reader::new(e.vec16().unwrap_or(&[]));
                while let (Some(g), Some(_)) = (list.u16(), list.vec16()) {
                    ch.key_share_groups.push(g);
                }
            }
            EXT_SESSION_TICKET => ch.session_ticket_len = Some(d.len()),
            EXT_PRE_SHARED_KEY => ch.pre_shared_key = true,
            EXT_ECH => {
                ch.ech = true;
                if e.u8() == Some(0) {
                    if let (Some(kdf), Some(aead)) = (e.u16(), e.u16()) {
                        ch.ech_ids = Some((kdf, aead));
                    }
                }
            }
            EXT_PSK_KEY_EXCHANGE_MODES => ch.psk_modes = Some(e.vec8().unwrap_or(&[]).to_vec()),
            _ => {}
        }
    }
    Some(ch)
}

/// Parses an SSLv2-format ClientHello record body (after the 2-byte header):
/// version, cipher specs (only those that are TLS suites, i.e. 0x00XXXX),
/// session id. No extensions exist in this format.
pub fn sslv2_client_hello(body: &[u8]) -> Option<ClientHello> {
    let mut r = Reader::new(body);
    if r.u8()? != HS_CLIENT_HELLO {
        return None;
    }
    let version = r.u16()?;
    let (cs, sid, chal) = (r.u16()? as usize, r.u16()? as usize, r.u16()? as usize);
    let specs = r.bytes(cs)?;
    let session_id = r.bytes(sid)?.to_vec();
    r.bytes(chal)?;
    let ciphers = specs
        .chunks_exact(3)
        .filter(|c| c[0] == 0)
        .map(|c| u16::from_be_bytes([c[1], c[2]]))
        .collect();
    Some(ClientHello {
        version,
        session_id,
        ciphers,
        sslv2: true,
        ..ClientHello::default()
    })
}

/// What the ServerHello says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerHello {
    pub version: u16,
    /// A HelloRetryRequest (TLS 1.3: the special random).
    pub retry: bool,
    pub session_id: Vec<u8>,
    pub cipher: u16,
    pub extensions: Vec<u16>,
    /// From `supported_versions`: the version really chosen (TLS 1.3).
    pub selected_version: Option<u16>,
    pub key_share_group: Option<u16>,
    pub alpn: Option<Vec<u8>>,
    pub pre_shared_key: bool,
    /// The `signed_certificate_timestamp` extension's data as sent (a
    /// `SignedCertificateTimestampList`, RFC 6962 3.3), for Zeek's
    /// validate-sct policy; `None` without the extension.
    pub sct_list: Option<Vec<u8>>,
}

/// Parses a ServerHello body. TLS 1.3 drafts before 22 (version field
/// 0x7fNN) had no session id and no compression method; both layouts are
/// tried, and the one whose extensions parse to the end wins.
pub fn server_hello(body: &[u8]) -> Option<ServerHello> {
    let mut r = Reader::new(body);
    let version = r.u16()?;
    let random = r.bytes(32)?;
    let after_random = r;
    let legacy = (|| {
        let mut r = after_random;
        let sid = r.vec8()?;
        let cipher = r.u16()?;
        r.u8()?;
        let ext = if r.is_empty() { &[][..] } else { r.vec16()? };
        if !r.is_empty() {
            return None;
        }
        Some((sid, cipher, extensions(ext)?))
    })();
    let draft = || {
        let mut r = after_random;
        let cipher = r.u16()?;
        let ext = if r.is_empty() { &[][..] } else { r.vec16()? };
        if !r.is_empty() {
            return None;
        }
        Some((&[][..], cipher, extensions(ext)?))
    };
    let is_old_draft = version >> 8 == 0x7f && (version & 0xff) < 22;
    let (sid, cipher, exts) = if is_old_draft {
        draft().or(legacy)?
    } else {
        legacy.or_else(draft)?
    };
    let mut sh = ServerHello {
        version,
        retry: random == HRR_RANDOM,
        session_id: sid.to_vec(),
        cipher,
        ..ServerHello::default()
    };
    for (t, d) in exts {
        sh.extensions.push(t);
        let mut e = Reader::new(d);
        match t {
            EXT_SUPPORTED_VERSIONS => sh.selected_version = e.u16(),
            EXT_KEY_SHARE | EXT_KEY_SHARE_OLD => sh.key_share_group = e.u16(),
            EXT_ALPN => {
                let mut list = Reader::new(e.vec16().unwrap_or(&[]));
                sh.alpn = list.vec8().map(<[u8]>::to_vec);
            }
            EXT_PRE_SHARED_KEY => sh.pre_shared_key = true,
            EXT_SIGNED_CERTIFICATE_TIMESTAMP => sh.sct_list = Some(d.to_vec()),
            _ => {}
        }
    }
    Some(sh)
}

/// The DER certificates of a TLS <= 1.2 Certificate message, in order.
pub fn certificates(body: &[u8]) -> Option<Vec<&[u8]>> {
    let mut list = Reader::new(Reader::new(body).vec24()?);
    let mut v = Vec::new();
    while !list.is_empty() {
        v.push(list.vec24()?);
    }
    Some(v)
}

/// The distinguished names (DER, each a whole `Name` SEQUENCE) a
/// CertificateRequest lists as the CAs the server accepts, for a session
/// of `version`. TLS <= 1.2 (RFC 5246 7.4.4; RFC 4346 7.4.4 has no
/// signature algorithms): `certificate_types<1..2^8-1>`, from TLS 1.2 on
/// `supported_signature_algorithms<2..2^16-2>`, then
/// `certificate_authorities<0..2^16-1>` of `DistinguishedName<1..2^16-1>`;
/// bytes after it are ignored. Zeek reads the same fields
/// (`CertificateRequest` in zeek/zeek a13de64f
/// `src/analyzer/protocol/ssl/tls-handshake-protocol.pac` lines 460-474:
/// signature algorithms when the chosen version is above TLS 1.1, then
/// `cont: bytestring &restofdata`). TLS 1.3 (RFC 8446 4.3.2):
/// `certificate_request_context<0..2^8-1>`, `extensions<2..2^16-1>`, the
/// names in the `certificate_authorities` extension (47, RFC 8446 4.2.4:
/// `authorities<3..2^16-1>`); there the message is encrypted on the wire,
/// so only plaintext handed in (a test, a decrypted stream) reaches this
/// form. `None` when the message does not parse.
pub fn certificate_request_cas(body: &[u8], version: u16) -> Option<Vec<&[u8]>> {
    let mut r = Reader::new(body);
    let list = if version == 0x0304 || version >> 8 == 0x7f || version >> 8 == 0x7e {
        r.vec8()?;
        let ext = extensions(r.vec16()?)?;
        match ext.iter().find(|(t, _)| *t == EXT_CERTIFICATE_AUTHORITIES) {
            Some((_, data)) => {
                let mut e = Reader::new(data);
                let list = e.vec16()?;
                if !e.is_empty() {
                    return None;
                }
                list
            }
            None => return Some(Vec::new()),
        }
    } else {
        r.vec8()?;
        if version > 0x0302 {
            r.vec16()?;
        }
        r.vec16()?
    };
    let mut list = Reader::new(list);
    let mut v = Vec::new();
    while !list.is_empty() {
        v.push(list.vec16()?);
    }
    Some(v)
}

/// The named curve of an ECDHE ServerKeyExchange (`curve_type` 3 =
/// named_curve, then the group), `None` for explicit curves.
pub fn ske_named_curve(body: &[u8]) -> Option<u16> {
    let mut r = Reader::new(body);
    if r.u8()? != 3 {
        return None;
    }
    r.u16()
}

/// The size in bits of the server's public value in a finite-field DHE
/// ServerKeyExchange (`dh_p`, `dh_g`, `dh_Ys`, each with a 16-bit length):
/// Zeek's ssl-log-ext `dh_param_size` is `|Ys| * 8`.
pub fn ske_dh_param_bits(body: &[u8]) -> Option<u32> {
    let mut r = Reader::new(body);
    r.vec16()?;
    r.vec16()?;
    Some(r.vec16()?.len() as u32 * 8)
}

/// Whether the suite's ServerKeyExchange carries finite-field DH
/// parameters (DHE and anonymous DH suites; Zeek's `DheServerKeyExchange`
/// and `DhAnonServerKeyExchange` cases in `tls-handshake-protocol.pac`).
pub fn cipher_is_dhe(c: u16) -> bool {
    cipher_name_known(c).is_some_and(|n| n.starts_with("TLS_DHE_") || n.starts_with("TLS_DH_anon_"))
}

/// ssl_history letter of a handshake message type (client side: upper case).
pub fn history_letter(msg_type: u8) -> u8 {
    match msg_type {
        0 => b'H',
        1 => b'C',
        2 => b'S',
        3 => b'V',
        4 => b'T',
        5 => b'E',
        6 => b'J',
        8 => b'O',
        11 => b'X',
        12 => b'K',
        13 => b'R',
        14 => b'N',
        15 => b'Y',
        16 => b'G',
        20 => b'F',
        21 => b'W',
        22 => b'U',
        23 => b'A',
        24 => b'P',
        254 => b'M',
        _ => b'Z',
    }
}

/// Zeek's name of a protocol version.
pub fn version_name(v: u16) -> String {
    match v {
        0x0002 => "SSLv2".into(),
        0x0300 => "SSLv3".into(),
        0x0301 => "TLSv10".into(),
        0x0302 => "TLSv11".into(),
        0x0303 => "TLSv12".into(),
        0x0304 => "TLSv13".into(),
        0xfeff => "DTLSv10".into(),
        0xfefd => "DTLSv12".into(),
        0xfefc => "DTLSv13".into(),
        v if v >> 8 == 0x7f => format!("TLSv13-draft{}", v & 0xff),
        v => format!("unknown-{v}"),
    }
}

/// IANA name of a cipher suite (`unknown-<decimal>` otherwise, as Zeek).
pub fn cipher_name(c: u16) -> String {
    cipher_name_known(c).map_or_else(|| format!("unknown-{c}"), str::to_string)
}

/// Whether the suite's key exchange is ephemeral elliptic-curve
/// Diffie-Hellman, i.e. its ServerKeyExchange starts with ECParameters.
pub fn cipher_is_ecdhe(c: u16) -> bool {
    cipher_name_known(c)
        .is_some_and(|n| n.starts_with("TLS_ECDHE_") || n.starts_with("TLS_ECDH_anon_"))
}

pub fn cipher_name_known(c: u16) -> Option<&'static str> {
    Some(match c {
        0x0000 => "TLS_NULL_WITH_NULL_NULL",
        0x0001 => "TLS_RSA_WITH_NULL_MD5",
        0x0002 => "TLS_RSA_WITH_NULL_SHA",
        0x0003 => "TLS_RSA_EXPORT_WITH_RC4_40_MD5",
        0x0004 => "TLS_RSA_WITH_RC4_128_MD5",
        0x0005 => "TLS_RSA_WITH_RC4_128_SHA",
        0x0006 => "TLS_RSA_EXPORT_WITH_RC2_CBC_40_MD5",
        0x0007 => "TLS_RSA_WITH_IDEA_CBC_SHA",
        0x0008 => "TLS_RSA_EXPORT_WITH_DES40_CBC_SHA",
        0x0009 => "TLS_RSA_WITH_DES_CBC_SHA",
        0x000a => "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        0x000b => "TLS_DH_DSS_EXPORT_WITH_DES40_CBC_SHA",
        0x000c => "TLS_DH_DSS_WITH_DES_CBC_SHA",
        0x000d => "TLS_DH_DSS_WITH_3DES_EDE_CBC_SHA",
        0x000e => "TLS_DH_RSA_EXPORT_WITH_DES40_CBC_SHA",
        0x000f => "TLS_DH_RSA_WITH_DES_CBC_SHA",
        0x0010 => "TLS_DH_RSA_WITH_3DES_EDE_CBC_SHA",
        0x0011 => "TLS_DHE_DSS_EXPORT_WITH_DES40_CBC_SHA",
        0x0012 => "TLS_DHE_DSS_WITH_DES_CBC_SHA",
        0x0013 => "TLS_DHE_DSS_WITH_3DES_EDE_CBC_SHA",
        0x0014 => "TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA",
        0x0015 => "TLS_DHE_RSA_WITH_DES_CBC_SHA",
        0x0016 => "TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA",
        0x0017 => "TLS_DH_anon_EXPORT_WITH_RC4_40_MD5",
        0x0018 => "TLS_DH_anon_WITH_RC4_128_MD5",
        0x0019 => "TLS_DH_anon_EXPORT_WITH_DES40_CBC_SHA",
        0x001a => "TLS_DH_anon_WITH_DES_CBC_SHA",
        0x001b => "TLS_DH_anon_WITH_3DES_EDE_CBC_SHA",
        0x002f => "TLS_RSA_WITH_AES_128_CBC_SHA",
        0x0030 => "TLS_DH_DSS_WITH_AES_128_CBC_SHA",
        0x0031 => "TLS_DH_RSA_WITH_AES_128_CBC_SHA",
        0x0032 => "TLS_DHE_DSS_WITH_AES_128_CBC_SHA",
        0x0033 => "TLS_DHE_RSA_WITH_AES_128_CBC_SHA",
        0x0034 => "TLS_DH_anon_WITH_AES_128_CBC_SHA",
        0x0035 => "TLS_RSA_WITH_AES_256_CBC_SHA",
        0x0036 => "TLS_DH_DSS_WITH_AES_256_CBC_SHA",
        0x0037 => "TLS_DH_RSA_WITH_AES_256_CBC_SHA",
        0x0038 => "TLS_DHE_DSS_WITH_AES_256_CBC_SHA",
        0x0039 => "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
        0x003a => "TLS_DH_anon_WITH_AES_256_CBC_SHA",
        0x003b => "TLS_RSA_WITH_NULL_SHA256",
        0x003c => "TLS_RSA_WITH_AES_128_CBC_SHA256",
        0x003d => "TLS_RSA_WITH_AES_256_CBC_SHA256",
        0x0040 => "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256",
        0x0041 => "TLS_RSA_WITH_CAMELLIA_128_CBC_SHA",
        0x0044 => "TLS_DHE_DSS_WITH_CAMELLIA_128_CBC_SHA",
        0x0045 => "TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA",
        0x0067 => "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
        0x006a => "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256",
        0x006b => "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
        0x0084 => "TLS_RSA_WITH_CAMELLIA_256_CBC_SHA",
        0x0087 => "TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA",
        0x0088 => "TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA",
        0x0096 => "TLS_RSA_WITH_SEED_CBC_SHA",
        0x0099 => "TLS_DHE_DSS_WITH_SEED_CBC_SHA",
        0x009a => "TLS_DHE_RSA_WITH_SEED_CBC_SHA",
        0x009c => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        0x009d => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        0x009e => "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
        0x009f => "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        0x00a2 => "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256",
        0x00a3 => "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384",
        0x00ff => "TLS_EMPTY_RENEGOTIATION_INFO_SCSV",
        0x1301 => "TLS_AES_128_GCM_SHA256",
        0x1302 => "TLS_AES_256_GCM_SHA384",
        0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
        0x1304 => "TLS_AES_128_CCM_SHA256",
        0x1305 => "TLS_AES_128_CCM_8_SHA256",
        0x5600 => "TLS_FALLBACK_SCSV",
        0xc001 => "TLS_ECDH_ECDSA_WITH_NULL_SHA",
        0xc002 => "TLS_ECDH_ECDSA_WITH_RC4_128_SHA",
        0xc003 => "TLS_ECDH_ECDSA_WITH_3DES_EDE_CBC_SHA",
        0xc004 => "TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA",
        0xc005 => "TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA",
        0xc006 => "TLS_ECDHE_ECDSA_WITH_NULL_SHA",
        0xc007 => "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        0xc008 => "TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA",
        0xc009 => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        0xc00a => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        0xc00b => "TLS_ECDH_RSA_WITH_NULL_SHA",
        0xc00c => "TLS_ECDH_RSA_WITH_RC4_128_SHA",
        0xc00d => "TLS_ECDH_RSA_WITH_3DES_EDE_CBC_SHA",
        0xc00e => "TLS_ECDH_RSA_WITH_AES_128_CBC_SHA",
        0xc00f => "TLS_ECDH_RSA_WITH_AES_256_CBC_SHA",
        0xc010 => "TLS_ECDHE_RSA_WITH_NULL_SHA",
        0xc011 => "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        0xc012 => "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        0xc013 => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        0xc014 => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        0xc015 => "TLS_ECDH_anon_WITH_NULL_SHA",
        0xc016 => "TLS_ECDH_anon_WITH_RC4_128_SHA",
        0xc017 => "TLS_ECDH_anon_WITH_3DES_EDE_CBC_SHA",
        0xc018 => "TLS_ECDH_anon_WITH_AES_128_CBC_SHA",
        0xc019 => "TLS_ECDH_anon_WITH_AES_256_CBC_SHA",
        0xc023 => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        0xc024 => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
        0xc025 => "TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA256",
        0xc026 => "TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA384",
        0xc027 => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        0xc028 => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        0xc029 => "TLS_ECDH_RSA_WITH_AES_128_CBC_SHA256",
        0xc02a => "TLS_ECDH_RSA_WITH_AES_256_CBC_SHA384",
        0xc02b => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        0xc02c => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        0xc02d => "TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256",
        0xc02e => "TLS_ECDH_ECDSA_WITH_AES_256_GCM_SHA384",
        0xc02f => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        0xc030 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        0xc031 => "TLS_ECDH_RSA_WITH_AES_128_GCM_SHA256",
        0xc032 => "TLS_ECDH_RSA_WITH_AES_256_GCM_SHA384",
        0xc09c => "TLS_RSA_WITH_AES_128_CCM",
        0xc09d => "TLS_RSA_WITH_AES_256_CCM",
        0xc0ac => "TLS_ECDHE_ECDSA_WITH_AES_128_CCM",
        0xc0ad => "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
        0xcca8 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        0xcca9 => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        0xccaa => "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        0xccab => "TLS_PSK_WITH_CHACHA20_POLY1305_SHA256",
        0xccac => "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
        0xccad => "TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
        _ => return None,
    })
}

/// Name of a supported group / named curve (`unknown-<decimal>` otherwise).
pub fn group_name(g: u16) -> String {
    const SECT: [&str; 22] = [
        "sect163k1",
        "sect163r1",
        "sect163r2",
        "sect193r1",
        "sect193r2",
        "sect233k1",
        "sect233r1",
        "sect239k1",
        "sect283k1",
        "sect283r1",
        "sect409k1",
        "sect409r1",
        "sect571k1",
        "sect571r1",
        "secp160k1",
        "secp160r1",
        "secp160r2",
        "secp192k1",
        "secp192r1",
        "secp224k1",
        "secp224r1",
        "secp256k1",
    ];
    let n = match g {
        1..=22 => SECT[g as usize - 1],
        23 => "secp256r1",
        24 => "secp384r1",
        25 => "secp521r1",
        26 => "brainpoolP256r1",
        27 => "brainpoolP384r1",
        28 => "brainpoolP512r1",
        29 => "x25519",
        30 => "x448",
        256 => "ffdhe2048",
        257 => "ffdhe3072",
        258 => "ffdhe4096",
        259 => "ffdhe6144",
        260 => "ffdhe8192",
        0x11ec => "X25519MLKEM768",
        0x6399 => "X25519Kyber768Draft00",
        0xff01 => "arbitrary_explicit_prime_curves",
        0xff02 => "arbitrary_explicit_char2_curves",
        _ => return format!("unknown-{g}"),
    };
    n.to_string()
}

/// Name of an alert description (`unknown-<decimal>` otherwise).
pub fn alert_name(d: u8) -> String {
    let n = match d {
        0 => "close_notify",
        10 => "unexpected_message",
        20 => "bad_record_mac",
        21 => "decryption_failed",
        22 => "record_overflow",
        30 => "decompression_failure",
        40 => "handshake_failure",
        41 => "no_certificate",
        42 => "bad_certificate",
        43 => "unsupported_certificate",
        44 => "certificate_revoked",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        47 => "illegal_parameter",
        48 => "unknown_ca",
        49 => "access_denied",
        50 => "decode_error",
        51 => "decrypt_error",
        60 => "export_restriction",
        70 => "protocol_version",
        71 => "insufficient_security",
        80 => "internal_error",
        86 => "inappropriate_fallback",
        90 => "user_canceled",
        100 => "no_renegotiation",
        109 => "missing_extension",
        110 => "unsupported_extension",
        111 => "certificate_unobtainable",
        112 => "unrecognized_name",
        113 => "bad_certificate_status_response",
        114 => "bad_certificate_hash_value",
        115 => "unknown_psk_identity",
        116 => "certificate_required",
        120 => "no_application_protocol",
        _ => return format!("unknown-{d}"),
    };
    n.to_string()
}
