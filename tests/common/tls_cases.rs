//! The shared TLS reference cases (`../shared/testdata/tls/`): which
//! capture of which case is read with which flags, and which of Zeek's logs
//! it must give. tests/tls_zeek.rs compares the logs, tests/x509_store.rs
//! the store's certificates.

use std::path::{Path, PathBuf};

/// The directory of the cases.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/tls")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Log {
    Ssl,
    X509,
    /// conn.log: only `service` is compared here (tests/zeek_conn.rs does the rest).
    Conn,
}

pub struct Case {
    pub case: &'static str,
    pub pcap: &'static str,
    /// Extra flags matching the Zeek run (-C), or telling wirelog where TLS
    /// hides (a port of its own).
    pub flags: &'static [&'static str],
    pub expected: &'static [(Log, &'static str)],
}

use Log::*;

pub const CASES: &[Case] = &[
    Case {
        case: "tls10_sni_basic",
        pcap: "tls-conn-with-extensions.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log")],
    },
    Case {
        case: "tls11_no_sni",
        pcap: "tls1_1.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.log"),
            (X509, "x509.log"),
            (Ssl, "ssl-log-ext.log"),
        ],
    },
    Case {
        case: "tls12_rsa_chain",
        pcap: "tls1.2.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log")],
    },
    Case {
        case: "tls12_ecdhe",
        pcap: "ecdhe.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.log"),
            (X509, "x509.log"),
            (X509, "x509.base64.log"),
            (Ssl, "ssl-log-ext.log"),
        ],
    },
    Case {
        case: "tls12_ecdsa",
        pcap: "ecdsa-cert.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log")],
    },
    Case {
        case: "tls12_failures",
        pcap: "tls-1.2-handshake-failure.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl.handshake-failure.log")],
    },
    Case {
        case: "tls12_failures",
        pcap: "tls1.2-late-protocol-error.pcap",
        flags: &["-C"],
        expected: &[
            (Ssl, "ssl.late-protocol-error.log"),
            (X509, "x509.late-protocol-error.log"),
        ],
    },
    // ssl-all.log holds the rows of both captures: each run matches its own.
    Case {
        case: "tls12_alpn_ocsp_sct",
        pcap: "signed_certificate_timestamp.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl-all.log")],
    },
    Case {
        case: "tls12_alpn_ocsp_sct",
        pcap: "signed_certificate_timestamp-2.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl-all.log")],
    },
    Case {
        case: "tls13_psk_resumption",
        pcap: "tls13_psk_succesfull.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft16-chrome55.0.2879.0-canary-aborted.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.draft16-chrome55-aborted.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft16-chrome55.0.2879.0-canary.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.draft16-chrome55.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft16-ff52.a01-aborted.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.draft16-ff52-aborted.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft16-ff52.a01.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.draft16-ff52.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft23-chrome67.0.3368.0-canary.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.draft23.log")],
    },
    // The ssl-log-ext run of the same capture was without -C.
    Case {
        case: "tls13_drafts",
        pcap: "tls13draft23-chrome67.0.3368.0-canary.pcap",
        flags: &[],
        expected: &[(Ssl, "ssl-log-ext.draft23.log")],
    },
    Case {
        case: "tls13_drafts",
        pcap: "chrome-63.0.3211.0-canary-tls_experiment.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.experiment.log")],
    },
    // STARTTLS after SMTP, IMAP and POP3, which wirelog does not parse: the
    // TLS parser is put on their ports and finds the handshake after the
    // plaintext (as Zeek's analyzers hand over at STARTTLS).
    Case {
        case: "starttls_smtp",
        pcap: "smtp-starttls.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log")],
    },
    Case {
        case: "starttls_imap",
        pcap: "imap-starttls.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log"), (Conn, "conn.log")],
    },
    Case {
        case: "starttls_pop3",
        pcap: "pop3-starttls.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log"), (Conn, "conn.log")],
    },
    Case {
        case: "x509_cert_repeat",
        pcap: "google-cert-repeat.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log"), (X509, "x509.log")],
    },
    Case {
        case: "cert_request_ipv6",
        pcap: "certificate-request-failed.pcap",
        flags: &["-C"],
        expected: &[(Ssl, "ssl.log")],
    },
    // TLS inside MySQL and PostgreSQL, on their default ports.
    Case {
        case: "starttls_databases",
        pcap: "encrypted.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.mysql-encrypted.log"),
            (X509, "x509.mysql-encrypted.log"),
            (Conn, "conn.mysql-encrypted.log"),
        ],
    },
    Case {
        case: "starttls_databases",
        pcap: "tls-12-amazon-rds.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.mysql-rds-tls12.log"),
            (X509, "x509.mysql-rds-tls12.log"),
            (Conn, "conn.mysql-rds-tls12.log"),
        ],
    },
    Case {
        case: "starttls_databases",
        pcap: "tls-13-amazon-rds.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.mysql-rds-tls13.log"),
            (Conn, "conn.mysql-rds-tls13.log"),
        ],
    },
    Case {
        case: "starttls_databases",
        pcap: "psql-aws-ssl-require.pcap",
        flags: &[],
        expected: &[
            (Ssl, "ssl.postgresql-rds.cut"),
            (Conn, "conn.postgresql-rds.cut"),
        ],
    },
];

