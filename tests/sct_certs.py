#!/usr/bin/env python3
"""Test-only: makes the certificates and SCTs of tests/tls_sct_live.rs.

Usage: sct_certs.py DIR

In DIR: three CT "logs" in the list (log_a and log_d ECDSA P-256 of operator
"Op One", log_b RSA 2048 of "Op Two") and one not in it (log_c); a CA
(ca.pem, ca.key); a leaf (sct.pem, sct.key) whose ct_precert_scts extension
holds four SCTs over its precertificate (RFC 6962 3.2: the TBS without that
extension, and the SHA-256 of the CA's SubjectPublicKeyInfo): log_a's and
log_b's valid, log_a's with a signature over another timestamp, log_c's
valid but of a log not in the list; serverinfo.pem, the TLS
signed_certificate_timestamp extension (type 18) for `openssl s_server
-serverinfo`, with two SCTs over the leaf itself: log_d's valid, log_b's
over another certificate; a leaf without SCTs (plain.pem); ct-logs.tsv, the
list (a, b, d) in wirelog's --ct-logs form; ocsp.der, a stapled OCSP
response (`openssl s_server -status_file`) saying plain.pem is good, signed
by the CA, with an SCT-list extension (1.3.6.1.4.1.11129.2.4.5, RFC 6962
3.3) in its single response (log_a's valid over plain.pem itself, log_d's
over sct.pem) and another in its responseExtensions (log_b's valid over
plain.pem): Zeek's OCSP analyzer reads both places, OpenSSL's CT code
(`ct_extract_ocsp_response_scts`) only the single response's. Prints what a
checker must find, as JSON: the valid SCTs' logs and operators per source.
"""

import base64
import datetime
import hashlib
import json
import struct
import sys

from cryptography import x509
from cryptography.x509 import ocsp
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID, ObjectIdentifier

SCT_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
OCSP_SCT_OID = "1.3.6.1.4.1.11129.2.4.5"
NOW = datetime.datetime.now(datetime.timezone.utc)


def spki(key):
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def log_id(key):
    # RFC 6962 3.2: the log id is the SHA-256 of the log's key.
    return hashlib.sha256(spki(key)).digest()


def signed_struct(ts, entry, issuer_key_hash=None):
    # RFC 6962 3.2 digitally-signed struct (v1, certificate_timestamp),
    # empty extensions.
    head = struct.pack(">BBQ", 0, 0, ts)
    if issuer_key_hash is None:
        body = struct.pack(">H", 0) + struct.pack(">I", len(entry))[1:] + entry
    else:
        body = struct.pack(">H", 1) + issuer_key_hash + struct.pack(">I", len(entry))[1:] + entry
    return head + body + b"\0\0"


def sign(key, data):
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return 3, key.sign(data, ec.ECDSA(hashes.SHA256()))
    return 1, key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def sct(key, ts, entry, issuer_key_hash=None, signed_ts=None):
    # An SCT of log `key` stamped `ts` over `entry` (a precertificate's TBS
    # when `issuer_key_hash` is given, else a certificate), its signature
    # over the struct of `signed_ts` (by default `ts`: a valid one).
    sig_alg, sig = sign(key, signed_struct(ts if signed_ts is None else signed_ts, entry, issuer_key_hash))
    return (struct.pack(">B", 0) + log_id(key) + struct.pack(">Q", ts) + b"\0\0"
            + struct.pack(">BB", 4, sig_alg) + struct.pack(">H", len(sig)) + sig)


def sct_list(scts):
    body = b"".join(struct.pack(">H", len(s)) + s for s in scts)
    return struct.pack(">H", len(body)) + body


def der(tag, body):
    n = len(body)
    if n < 0x80:
        ln = bytes([n])
    elif n < 0x100:
        ln = bytes([0x81, n])
    else:
        ln = bytes([0x82]) + struct.pack(">H", n)
    return bytes([tag]) + ln + body


def der_octet_string(b):
    return der(0x04, b)


def der_oid(dotted):
    parts = [int(p) for p in dotted.split(".")]
    body = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        enc = [p & 0x7F]
        p >>= 7
        while p:
            enc.append(0x80 | (p & 0x7F))
            p >>= 7
        body += bytes(reversed(enc))
    return der(0x06, body)


def der_time(t):
    return der(0x18, t.strftime("%Y%m%d%H%M%SZ").encode())


def sct_ext(scts):
    # Extension ::= SEQUENCE { extnID, extnValue OCTET STRING } whose value
    # is an OCTET STRING holding the SCT list (RFC 6962 3.3).
    return der(0x30, der_oid(OCSP_SCT_OID) + der_octet_string(der_octet_string(sct_list(scts))))


def ocsp_response(cert, issuer, issuer_key, single_scts, response_scts):
    # RFC 6960 4.2.1, by hand: cryptography's OCSPResponseBuilder writes no
    # single-response extensions, where OpenSSL's CT code reads SCTs.
    issuer_key_bits = issuer.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    name_hash = hashlib.sha1(issuer.subject.public_bytes()).digest()
    key_hash = hashlib.sha1(issuer_key_bits).digest()
    sha1_alg = der(0x30, der_oid("1.3.14.3.2.26") + b"\x05\x00")
    serial = cert.serial_number.to_bytes((cert.serial_number.bit_length() + 8) // 8, "big")
    cert_id = der(0x30, sha1_alg + der(0x04, name_hash) + der(0x04, key_hash) + der(0x02, serial))
    single = der(0x30, cert_id + b"\x80\x00" + der_time(NOW) + der(0xA0, der_time(NOW + datetime.timedelta(days=7)))
                 + der(0xA1, der(0x30, sct_ext(single_scts))))
    tbs = der(0x30, der(0xA2, der(0x04, key_hash)) + der_time(NOW) + der(0x30, single)
              + der(0xA1, der(0x30, sct_ext(response_scts))))
    sig = issuer_key.sign(tbs, ec.ECDSA(hashes.SHA256()))
    basic = der(0x30, tbs + der(0x30, der_oid("1.2.840.10045.4.3.2")) + der(0x03, b"\x00" + sig))
    return der(0x30, der(0x0A, b"\x00") + der(0xA0, der(0x30, der_oid("1.3.6.1.5.5.7.48.1.1") + der(0x04, basic))))


def write_key(dir, name, key):
    open(f"{dir}/{name}.key", "wb").write(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def main():
    dir = sys.argv[1]
    ec_key = lambda: ec.generate_private_key(ec.SECP256R1())
    log_a, log_b, log_c, log_d = ec_key(), rsa.generate_private_key(65537, 2048), ec_key(), ec_key()
    listed = [(log_a, "Op One", "Test log A"), (log_b, "Op Two", "Test log B (RSA)"), (log_d, "Op One", "Test log D")]
    with open(f"{dir}/ct-logs.tsv", "w") as f:
        f.write("# made by tests/sct_certs.py\n")
        for k, op, desc in listed:
            f.write(f"{base64.b64encode(log_id(k)).decode()}\t{base64.b64encode(spki(k)).decode()}\t{op}\t{desc}\n")

    ca_key = ec_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Wirelog SCT Test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    open(f"{dir}/ca.pem", "wb").write(ca.public_bytes(serialization.Encoding.PEM))
    write_key(dir, "ca", ca_key)

    def leaf_builder(key, serial):
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "www.example.org")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(serial)
                .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=20))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=False)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("www.example.org")]), critical=False))

    leaf_key = ec_key()
    write_key(dir, "sct", leaf_key)
    # The precertificate's TBS: the final certificate's without the SCT
    # extension (added last below, so removing it gives these bytes).
    tbs = leaf_builder(leaf_key, 77).sign(ca_key, hashes.SHA256()).tbs_certificate_bytes
    ikh = hashlib.sha256(spki(ca_key)).digest()
    # A minute ago: OpenSSL's CT code takes an SCT stamped after the
    # session's start, which it has in whole seconds
    # (`SSL_SESSION_get_time(..) * 1000` in ssl_validate_ct), as invalid,
    # so one made in the second of the handshake would fail there.
    ts = int(NOW.timestamp() * 1000) - 60_000
    cert_scts = [
        sct(log_a, ts, tbs, ikh),
        sct(log_b, ts + 1, tbs, ikh),
        sct(log_a, ts + 2, tbs, ikh, signed_ts=ts + 999),  # signature over another timestamp
        sct(log_c, ts + 3, tbs, ikh),  # a log not in the list
    ]
    ext = x509.UnrecognizedExtension(SCT_OID, der_octet_string(sct_list(cert_scts)))
    leaf = leaf_builder(leaf_key, 77).add_extension(ext, critical=False).sign(ca_key, hashes.SHA256())
    open(f"{dir}/sct.pem", "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
    leaf_der = leaf.public_bytes(serialization.Encoding.DER)

    plain_key = ec_key()
    write_key(dir, "plain", plain_key)
    plain = leaf_builder(plain_key, 78).sign(ca_key, hashes.SHA256())
    open(f"{dir}/plain.pem", "wb").write(plain.public_bytes(serialization.Encoding.PEM))

    tls_scts = [
        sct(log_d, ts + 4, leaf_der),
        sct(log_b, ts + 5, plain.public_bytes(serialization.Encoding.DER)),  # over another certificate
    ]
    data = sct_list(tls_scts)
    info = struct.pack(">HH", 18, len(data)) + data
    b64 = base64.encodebytes(info).decode()
    open(f"{dir}/serverinfo.pem", "w").write(f"-----BEGIN SERVERINFO FOR CT-----\n{b64}-----END SERVERINFO FOR CT-----\n")
    plain_der = plain.public_bytes(serialization.Encoding.DER)
    resp = ocsp_response(
        plain, ca, ca_key,
        [sct(log_a, ts + 6, plain_der), sct(log_d, ts + 7, leaf_der)],  # log_d's over sct.pem
        [sct(log_b, ts + 8, plain_der)])
    # Checked by cryptography's own reader: a response it parses, with one
    # single-response extension.
    parsed = ocsp.load_der_ocsp_response(resp)
    assert parsed.response_status == ocsp.OCSPResponseStatus.SUCCESSFUL and parsed.serial_number == 78
    assert len(parsed.single_extensions) == 1 and len(parsed.extensions) == 1
    open(f"{dir}/ocsp.der", "wb").write(resp)
    print(json.dumps({
        "x509": {"valid_logs": ["Test log A", "Test log B (RSA)"], "valid_operators": ["Op One", "Op Two"], "invalid": 2},
        "tls": {"valid_logs": ["Test log D"], "valid_operators": ["Op One"], "invalid": 1},
        "ocsp": {"valid_logs": ["Test log A", "Test log B (RSA)"], "valid_operators": ["Op One", "Op Two"], "invalid": 1},
    }))


if __name__ == "__main__":
    main()
