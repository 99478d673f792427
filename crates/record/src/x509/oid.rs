//! Object identifiers: dotted text and the names OpenSSL gives the ones that
//! occur in certificates. Zeek prints algorithms with `i2t_ASN1_OBJECT`
//! (OpenSSL's long name), name attributes with their short name and curves
//! with their short name; an OID not in these tables is printed dotted, as
//! OpenSSL does for objects it does not know.

use super::{X509Error, X509ErrorKind};

/// Dotted text of an OID's contents (`OBJ_obj2txt(.., 1)`). Encodings that
/// `d2i_ASN1_OBJECT` refuses (empty, a sub-identifier padded with 0x80, a
/// last octet with the continuation bit) are errors.
pub(super) fn dotted(content: &[u8], field: &'static str) -> Result<String, X509Error> {
    let bad = X509Error {
        field,
        kind: X509ErrorKind::BadValue,
    };
    if content.is_empty() || content[content.len() - 1] & 0x80 != 0 {
        return Err(bad);
    }
    let mut out = String::new();
    let mut v: u128 = 0;
    let mut start = true;
    let mut first = true;
    for &b in content {
        if start && b == 0x80 {
            return Err(bad);
        }
        start = false;
        // Sub-identifiers beyond 128 bits do not occur in certificates;
        // refusing them keeps the arithmetic simple.
        if v >> 121 != 0 {
            return Err(bad);
        }
        v = v << 7 | (b & 0x7f) as u128;
        if b & 0x80 == 0 {
            if first {
                let (a, rest) = match v {
                    0..=39 => (0, v),
                    40..=79 => (1, v - 40),
                    _ => (2, v - 80),
                };
                out.push_str(&format!("{a}.{rest}"));
                first = false;
            } else {
                out.push_str(&format!(".{v}"));
            }
            v = 0;
            start = true;
        }
    }
    Ok(out)
}

/// OpenSSL long names of public-key and signature algorithms.
const ALGORITHMS: &[(&str, &str)] = &[
    ("1.2.840.113549.1.1.1", "rsaEncryption"),
    ("1.2.840.113549.1.1.2", "md2WithRSAEncryption"),
    ("1.2.840.113549.1.1.3", "md4WithRSAEncryption"),
    ("1.2.840.113549.1.1.4", "md5WithRSAEncryption"),
    ("1.2.840.113549.1.1.5", "sha1WithRSAEncryption"),
    ("1.2.840.113549.1.1.7", "rsaesOaep"),
    ("1.2.840.113549.1.1.10", "rsassaPss"),
    ("1.2.840.113549.1.1.11", "sha256WithRSAEncryption"),
    ("1.2.840.113549.1.1.12", "sha384WithRSAEncryption"),
    ("1.2.840.113549.1.1.13", "sha512WithRSAEncryption"),
    ("1.2.840.113549.1.1.14", "sha224WithRSAEncryption"),
    ("1.2.840.113549.1.1.15", "sha512-224WithRSAEncryption"),
    ("1.2.840.113549.1.1.16", "sha512-256WithRSAEncryption"),
    ("1.2.840.113549.1.3.1", "dhKeyAgreement"),
    ("1.3.14.3.2.3", "md5WithRSA"),
    ("1.3.14.3.2.12", "dsaEncryption-old"),
    ("1.3.14.3.2.13", "dsaWithSHA"),
    ("1.3.14.3.2.15", "shaWithRSAEncryption"),
    ("1.3.14.3.2.27", "dsaWithSHA1-old"),
    ("1.3.14.3.2.29", "sha1WithRSA"),
    ("2.5.8.1.1", "rsa"),
    ("1.2.840.10040.4.1", "dsaEncryption"),
    ("1.2.840.10040.4.3", "dsaWithSHA1"),
    ("1.2.840.10046.2.1", "X9.42 DH"),
    ("1.2.840.10045.2.1", "id-ecPublicKey"),
    ("1.2.840.10045.4.1", "ecdsa-with-SHA1"),
    ("1.2.840.10045.4.2", "ecdsa-with-Recommended"),
    ("1.2.840.10045.4.3", "ecdsa-with-Specified"),
    ("1.2.840.10045.4.3.1", "ecdsa-with-SHA224"),
    ("1.2.840.10045.4.3.2", "ecdsa-with-SHA256"),
    ("1.2.840.10045.4.3.3", "ecdsa-with-SHA384"),
    ("1.2.840.10045.4.3.4", "ecdsa-with-SHA512"),
    ("2.16.840.1.101.3.4.3.1", "dsa_with_SHA224"),
    ("2.16.840.1.101.3.4.3.2", "dsa_with_SHA256"),
    ("2.16.840.1.101.3.4.3.3", "dsa_with_SHA384"),
    ("2.16.840.1.101.3.4.3.4", "dsa_with_SHA512"),
    ("2.16.840.1.101.3.4.3.9", "ecdsa_with_SHA3-224"),
    ("2.16.840.1.101.3.4.3.10", "ecdsa_with_SHA3-256"),
    ("2.16.840.1.101.3.4.3.11", "ecdsa_with_SHA3-384"),
    ("2.16.840.1.101.3.4.3.12", "ecdsa_with_SHA3-512"),
    ("2.16.840.1.101.3.4.3.13", "RSA-SHA3-224"),
    ("2.16.840.1.101.3.4.3.14", "RSA-SHA3-256"),
    ("2.16.840.1.101.3.4.3.15", "RSA-SHA3-384"),
    ("2.16.840.1.101.3.4.3.16", "RSA-SHA3-512"),
    ("1.3.101.110", "X25519"),
    ("1.3.101.111", "X448"),
    ("1.3.101.112", "ED25519"),
    ("1.3.101.113", "ED448"),
    ("1.2.156.10197.1.501", "SM2-with-SM3"),
];

/// OpenSSL short names of name attributes (`XN_FLAG_FN_SN`).
pub const ATTRIBUTES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.4", "SN"),
    ("2.5.4.5", "serialNumber"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "street"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.12", "title"),
    ("2.5.4.13", "description"),
    ("2.5.4.14", "searchGuide"),
    ("2.5.4.15", "businessCategory"),
    ("2.5.4.16", "postalAddress"),
    ("2.5.4.17", "postalCode"),
    ("2.5.4.18", "postOfficeBox"),
    ("2.5.4.19", "physicalDeliveryOfficeName"),
    ("2.5.4.20", "telephoneNumber"),
    ("2.5.4.21", "telexNumber"),
    ("2.5.4.22", "teletexTerminalIdentifier"),
    ("2.5.4.23", "facsimileTelephoneNumber"),
    ("2.5.4.24", "x121Address"),
    ("2.5.4.25", "internationaliSDNNumber"),
    ("2.5.4.26", "registeredAddress"),
    ("2.5.4.27", "destinationIndicator"),
    ("2.5.4.28", "preferredDeliveryMethod"),
    ("2.5.4.29", "presentationAddress"),
    ("2.5.4.30", "supportedApplicationContext"),
    ("2.5.4.31", "member"),
    ("2.5.4.32", "owner"),
    ("2.5.4.33", "roleOccupant"),
    ("2.5.4.34", "seeAlso"),
    ("2.5.4.35", "userPassword"),
    ("2.5.4.36", "userCertificate"),
    ("2.5.4.37", "cACertificate"),
    ("2.5.4.38", "authorityRevocationList"),
    ("2.5.4.39", "certificateRevocationList"),
    ("2.5.4.40", "crossCertificatePair"),
    ("2.5.4.41", "name"),
    ("2.5.4.42", "GN"),
    ("2.5.4.43", "initials"),
    ("2.5.4.44", "generationQualifier"),
    ("2.5.4.45", "x500UniqueIdentifier"),
    ("2.5.4.46", "dnQualifier"),
    ("2.5.4.47", "enhancedSearchGuide"),
    ("2.5.4.48", "protocolInformation"),
    ("2.5.4.49", "distinguishedName"),
    ("2.5.4.50", "uniqueMember"),
    ("2.5.4.51", "houseIdentifier"),
    ("2.5.4.52", "supportedAlgorithms"),
    ("2.5.4.53", "deltaRevocationList"),
    ("2.5.4.54", "dmdName"),
    ("2.5.4.65", "pseudonym"),
    ("2.5.4.72", "role"),
    ("2.5.4.97", "organizationIdentifier"),
    ("1.2.840.113549.1.9.1", "emailAddress"),
    ("1.2.840.113549.1.9.2", "unstructuredName"),
    ("1.2.840.113549.1.9.8", "unstructuredAddress"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.3", "mail"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("1.3.6.1.4.1.311.60.2.1.1", "jurisdictionL"),
    ("1.3.6.1.4.1.311.60.2.1.2", "jurisdictionST"),
    ("1.3.6.1.4.1.311.60.2.1.3", "jurisdictionC"),
];

/// Named curves: OpenSSL short name and the bit length of the group order
/// (what Zeek logs as the key length of an EC key).
const CURVES: &[(&str, &str, u32)] = &[
    ("1.2.840.10045.3.1.1", "prime192v1", 192),
    ("1.2.840.10045.3.1.2", "prime192v2", 192),
    ("1.2.840.10045.3.1.3", "prime192v3", 192),
    ("1.2.840.10045.3.1.4", "prime239v1", 239),
    ("1.2.840.10045.3.1.5", "prime239v2", 239),
    ("1.2.840.10045.3.1.6", "prime239v3", 239),
    ("1.2.840.10045.3.1.7", "prime256v1", 256),
    ("1.3.132.0.6", "secp112r1", 112),
    ("1.3.132.0.7", "secp112r2", 110),
    ("1.3.132.0.28", "secp128r1", 128),
    ("1.3.132.0.29", "secp128r2", 126),
    ("1.3.132.0.9", "secp160k1", 161),
    ("1.3.132.0.8", "secp160r1", 161),
    ("1.3.132.0.30", "secp160r2", 161),
    ("1.3.132.0.31", "secp192k1", 192),
    ("1.3.132.0.32", "secp224k1", 225),
    ("1.3.132.0.33", "secp224r1", 224),
    ("1.3.132.0.10", "secp256k1", 256),
    ("1.3.132.0.34", "secp384r1", 384),
    ("1.3.132.0.35", "secp521r1", 521),
    ("1.3.36.3.3.2.8.1.1.1", "brainpoolP160r1", 160),
    ("1.3.36.3.3.2.8.1.1.2", "brainpoolP160t1", 160),
    ("1.3.36.3.3.2.8.1.1.3", "brainpoolP192r1", 192),
    ("1.3.36.3.3.2.8.1.1.4", "brainpoolP192t1", 192),
    ("1.3.36.3.3.2.8.1.1.5", "brainpoolP224r1", 224),
    ("1.3.36.3.3.2.8.1.1.6", "brainpoolP224t1", 224),
    ("1.3.36.3.3.2.8.1.1.7", "brainpoolP256r1", 256),
    ("1.3.36.3.3.2.8.1.1.8", "brainpoolP256t1", 256),
    ("1.3.36.3.3.2.8.1.1.9", "brainpoolP320r1", 320),
    ("1.3.36.3.3.2.8.1.1.10", "brainpoolP320t1", 320),
    ("1.3.36.3.3.2.8.1.1.11", "brainpoolP384r1", 384),
    ("1.3.36.3.3.2.8.1.1.12", "brainpoolP384t1", 384),
    ("1.3.36.3.3.2.8.1.1.13", "brainpoolP512r1", 512),
    ("1.3.36.3.3.2.8.1.1.14", "brainpoolP512t1", 512),
];

fn lookup<'t>(table: &'t [(&str, &'t str)], dotted: &str) -> Option<&'t str> {
    table.iter().find(|(o, _)| *o == dotted).map(|(_, n)| *n)
}

/// OpenSSL's long name of an algorithm, or the dotted OID.
pub(super) fn algorithm_name(dotted: &str) -> String {
    lookup(ALGORITHMS, dotted).map_or_else(|| dotted.to_string(), str::to_string)
}

/// Short name of a name attribute, if OpenSSL knows it.
pub(super) fn attribute_name(dotted: &str) -> Option<&'static str> {
    lookup(ATTRIBUTES, dotted)
}

/// Short name and order bits of a named curve OpenSSL knows.
pub(super) fn curve(dotted: &str) -> Option<(&'static str, u32)> {
    CURVES
        .iter()
        .find(|(o, ..)| *o == dotted)
        .map(|&(_, n, b)| (n, b))
}

pub(super) const RSA: &str = "1.2.840.113549.1.1.1";
pub(super) const MD5_WITH_RSA: &str = "1.2.840.113549.1.1.4";
pub(super) const RSA_X500: &str = "2.5.8.1.1";
pub(super) const DSA: &str = "1.2.840.10040.4.1";
pub(super) const DSA_OLD: &str = "1.3.14.3.2.12";
pub(super) const EC: &str = "1.2.840.10045.2.1";
pub(super) const COMMON_NAME: &str = "2.5.4.3";
pub(super) const SUBJECT_ALT_NAME: &str = "2.5.29.17";
pub(super) const BASIC_CONSTRAINTS: &str = "2.5.29.19";
/// RFC 6962 3.3: the SCT list of a certificate (OpenSSL's `NID_ct_precert_scts`).
pub(super) const CT_PRECERT_SCTS: &str = "1.3.6.1.4.1.11129.2.4.2";
