#!/usr/bin/env bash
# The whole test suite: installs the Debian packages the tests use (when run
# as root and they are missing), then runs every test of the workspace.
# Tests that start real servers (nginx, dnsmasq, MariaDB, ...) do so inside
# network namespaces they create, which needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(tshark wireshark-common tcpdump tcpreplay iproute2 procps time openssl
      # the servers and clients of tests/capture_servers.rs
      nginx wrk curl mariadb-server mariadb-client sysbench dnsmasq-base dnsutils
      # the PostgreSQL server and client of tests/tls_plaintext_db.rs
      postgresql
      # the GnuTLS client (gnutls-cli) of tests/tls_plaintext.rs
      gnutls-bin
      # the Redis server and client (TLS: both link OpenSSL) of tests/tls_plaintext_db.rs
      redis-server
      # the server of tests/memcached_live.rs
      memcached
      # the broker of tests/mqtt_live.rs
      mosquitto
      # the broker of tests/amqp_live.rs (its client, pika, below)
      rabbitmq-server
      # the JVM and the build tool that fetches the Kafka broker's jars (tests/kafka_live.rs)
      openjdk-17-jre-headless maven
      # the HTTP/2 server and clients of tests/http2_live.rs (nghttpd, nghttp, h2load)
      nghttp2-server nghttp2-client
      # the cleartext proxy that takes curl's `Upgrade: h2c` (tests/http2_live.rs)
      nghttp2-proxy
      # the browser of tests/serve_ui.rs (headless, driven over its DevTools pipe)
      chromium
      # the ping traffic and the ClickHouse name on port 8123 of tests/help_examples.rs
      iputils-ping socat
      # the FTP, IRC, XMPP and LDAP servers (and LDAP client) of tests/services_live.rs
      vsftpd ngircd prosody slapd ldap-utils
      # the trust store tests/tls_zeek.rs validates chains against
      # (--zeek-policy validate-certs loads libssl3's libcrypto.so.3 at run time)
      ca-certificates
      # the certificates and SCTs tests/tls_sct_live.rs makes (tests/sct_certs.py)
      python3-cryptography
      # the veth's rxvlan offload, off and on, of tests/capture_live.rs
      # (tagged_non_ip_frames_are_counted_in_the_kernel)
      ethtool)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "scripts/test.sh: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    # The packages' own daemons (nginx, MariaDB) are not started on the host:
    # the tests start their servers themselves, in namespaces.
    own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if ((own_policy)); then
        rm -f /usr/sbin/policy-rc.d
        trap - EXIT
    fi
fi

# DuckDB (from PyPI) reads the store in tests/store_duckdb.rs.
if ! python3 -c 'import duckdb' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check duckdb 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages duckdb
fi

# pyarrow and pandas (from PyPI) read one store file of every kind in tests/store_readers.rs.
if ! python3 -c 'import pyarrow, pandas' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check pyarrow pandas 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pyarrow pandas
fi

# The ClickHouse engine in-process (chdb, from PyPI) behind tests/clickhouse/endpoint.py, with what
# it needs to read the LZ4-framed bodies the clickhouse crate sends.
if ! python3 -c 'import chdb, lz4, clickhouse_cityhash, zstandard' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check chdb-core lz4 clickhouse-cityhash zstandard 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages chdb-core lz4 clickhouse-cityhash zstandard
fi

# pymongo (from PyPI) drives the MongoDB client of tests/mongodb_live.rs.
if ! python3 -c 'import pymongo' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check pymongo 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pymongo
fi

# FerretDB (MongoDB's wire protocol on SQLite) for tests/mongodb_live.rs's pymongo test: built by
# default (WIRELOG_BUILD_FERRETDB=0 skips it), once, from its Go module into a cache kept between
# runs. With an empty Go build cache it took 1 min 54 s user + 20 s system CPU here (2026-11-28;
# 23 min of wall time only because it ran at nice 19 beside other builds). If it does not build,
# the run goes on and the pymongo test says NOT RUN; the test's raw wire peers run either way.
FERRETDB_VERSION=v1.24.2
ferret_dir="${XDG_CACHE_HOME:-$HOME/.cache}/wirelog/ferretdb-$FERRETDB_VERSION"
if [[ ${WIRELOG_BUILD_FERRETDB:-1} == 1 && ! -x "$ferret_dir/ferretdb" ]] && command -v go >/dev/null; then
    # `go install` of the module leaves out build/version/version.txt, without which FerretDB
    # panics at start: build from a copy of the module's source with the version written in.
    # One chain of &&: `set -e` does not act in a subshell whose status `||` tests.
    mkdir -p "$ferret_dir" && (
        cd "$(mktemp -d)" &&
            GOFLAGS=-mod=mod timeout 600 go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" >mod.json &&
            src=$(python3 -c 'import json; print(json.load(open("mod.json"))["Dir"])') &&
            cp -r "$src" ferretdb && chmod -R u+w ferretdb &&
            echo "$FERRETDB_VERSION" >ferretdb/build/version/version.txt &&
            cd ferretdb && GOFLAGS=-mod=mod timeout 1200 go build -o "$ferret_dir/ferretdb" ./cmd/ferretdb
    ) || echo "scripts/test.sh: FerretDB $FERRETDB_VERSION did not build; tests/mongodb_live.rs's pymongo test will say NOT RUN" >&2
fi
if [[ -x "$ferret_dir/ferretdb" ]]; then
    export WIRELOG_FERRETDB="$ferret_dir/ferretdb"
fi

# The AMQP client (pika, from PyPI) of tests/amqp_live.rs.
if ! python3 -c 'import pika' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check pika 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pika
fi

# The Kafka broker of tests/kafka_live.rs: Apache Kafka's jars from Maven Central (kafka_2.13 and
# what it needs at run time), fetched once into a cache directory; its client, kafka-python, from PyPI.
KAFKA_VERSION=4.1.1
export WIRELOG_KAFKA_LIBS=${WIRELOG_KAFKA_LIBS:-$HOME/.cache/wirelog/kafka-$KAFKA_VERSION/lib}
if [[ ! -e $WIRELOG_KAFKA_LIBS/kafka_2.13-$KAFKA_VERSION.jar ]]; then
    pom=$(mktemp -d)
    cat >"$pom/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>wirelog.test</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
POM
    # A failed fetch does not stop the suite: tests/kafka_live.rs then names the missing jar.
    (cd "$pom" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$WIRELOG_KAFKA_LIBS") ||
        echo "scripts/test.sh: fetching Kafka $KAFKA_VERSION's jars from Maven Central failed" >&2
    rm -rf "$pom"
fi
if ! python3 -c 'import kafka' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check kafka-python 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages kafka-python
fi

# The gRPC server and client of tests/grpc_live.rs (grpcio, and grpcio-tools for the stubs).
if ! python3 -c 'import grpc, grpc_tools' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check grpcio grpcio-tools 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages grpcio grpcio-tools
fi

# Tests that need root (network namespaces) fail instead of skipping when this is set.
export WIRELOG_REQUIRE_ALL_TESTS=${WIRELOG_REQUIRE_ALL_TESTS:-$([[ $(id -u) -eq 0 ]] && echo 1 || echo 0)}
exec cargo test --release --workspace "$@"
