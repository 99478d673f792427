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
      # the server of tests/memcached_live.rs
      memcached
      # the HTTP/2 server and clients of tests/http2_live.rs (nghttpd, nghttp, h2load)
      nghttp2-server nghttp2-client
      # the browser of tests/serve_ui.rs (headless, driven over its DevTools pipe)
      chromium)
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

# The ClickHouse engine in-process (chdb, from PyPI) behind tests/clickhouse/endpoint.py, with what
# it needs to read the LZ4-framed bodies the clickhouse crate sends.
if ! python3 -c 'import chdb, lz4, clickhouse_cityhash, zstandard' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check chdb-core lz4 clickhouse-cityhash zstandard 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages chdb-core lz4 clickhouse-cityhash zstandard
fi

# The gRPC server and client of tests/grpc_live.rs (grpcio, and grpcio-tools for the stubs).
if ! python3 -c 'import grpc, grpc_tools' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check grpcio grpcio-tools 2>/dev/null ||
        python3 -m pip install --quiet --disable-pip-version-check --break-system-packages grpcio grpcio-tools
fi

# Tests that need root (network namespaces) fail instead of skipping when this is set.
export WIRELOG_REQUIRE_ALL_TESTS=${WIRELOG_REQUIRE_ALL_TESTS:-$([[ $(id -u) -eq 0 ]] && echo 1 || echo 0)}
exec cargo test --release --workspace "$@"
