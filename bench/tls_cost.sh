#!/bin/bash
# bench/tls_cost.sh - what TLS parsing costs `wirelog read` (issue 16): per TLS connection (handshake
# parsed, ssl.log/x509.log/store rows written) and per packet after the handshake.
#
# Captures (made once, reused; real traffic on a private namespace's loopback with MTU 1500):
#   tls13_short.pcap  wrk with "Connection: close" to nginx on 443 (TLS 1.3): one full handshake per
#                     request, SHORT_SECS seconds
#   tls12_short.pcap  the same to nginx on 8443 limited to TLS 1.2 (certificate chain in plaintext,
#                     so x509.log rows too)
#   tls_long.pcap     LONG_N curl downloads of a LONG_MB MiB file over TLS 1.3, one connection each:
#                     nearly every packet comes after the handshake
# nginx's certificate is self-signed, made here with openssl.
#
# Each capture is read REPS times with TLS parsing on (default) and off, alternating; CPU is perf's
# task-clock of one run (user + sys, ms resolution), median of REPS. "Off" is `--ports tls=9
# --no-detect` (no port is TLS and content detection is off: the connections are tracked and
# logged in conn.log as before TLS existed); set OFF="--no-parse" for the other baseline.
#   cost per connection      = (median on - median off) / ssl.log rows          (short captures)
#   cost per packet after    = (median on - median off) / packets in the capture (long capture)
# usage: bench/tls_cost.sh   (env: WIRELOG, WIRELOG_PEERS_DIR, REPS=7, SHORT_SECS=3, LONG_N=4,
#                             LONG_MB=16, OFF, REMAKE=1 to make the captures again)
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
WIRELOG=${WIRELOG:-$REPO/target/release/wirelog}
PCAPS=${WIRELOG_PEERS_DIR:-$REPO/target/wirelog-peers}/pcaps
REPS=${REPS:-7}
SHORT_SECS=${SHORT_SECS:-3}
LONG_N=${LONG_N:-4}
LONG_MB=${LONG_MB:-16}
OFF=${OFF:---ports tls=9 --no-detect}
NS=tlscost$$
W=$(mktemp -d /tmp/wirelog-tlscost.XXXXXX)
NGINX_PID= TCPDUMP_PID=
for t in perf nginx openssl wrk curl tcpdump capinfos ethtool; do
    command -v $t >/dev/null || { echo "$t is not installed (apt-get install linux-perf nginx openssl wrk curl tcpdump tshark ethtool)" >&2; exit 1; }
done
mkdir -p "$PCAPS"

cleanup() {
    set +e
    [[ -n $TCPDUMP_PID ]] && kill "$TCPDUMP_PID" 2>/dev/null && wait "$TCPDUMP_PID" 2>/dev/null
    [[ -n $NGINX_PID ]] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
    ip netns del "$NS" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
nsx() { ip netns exec "$NS" "$@"; }

start_server() {
    ip netns add "$NS"
    nsx ip link set lo mtu 1500 up
    # no segmentation offload: the capture holds wire-sized packets, not 64 KB GSO super-packets
    nsx ethtool -K lo tso off gso off gro off >/dev/null
    mkdir -p "$W/www" "$W/ngx/tmp"
    printf '<!DOCTYPE html><html><body>%s</body></html>\n' "$(head -c 600 /dev/zero | tr '\0' x)" >"$W/www/index.html"
    head -c $((LONG_MB << 20)) /dev/urandom >"$W/www/big.bin"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=bench.wirelog.test" \
        -addext "subjectAltName=DNS:bench.wirelog.test" -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
    cat >"$W/ngx/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $W/ngx/nginx.pid;
error_log $W/ngx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $W/ngx/tmp/body; proxy_temp_path $W/ngx/tmp/proxy;
    fastcgi_temp_path $W/ngx/tmp/fastcgi; uwsgi_temp_path $W/ngx/tmp/uwsgi; scgi_temp_path $W/ngx/tmp/scgi;
    ssl_certificate $W/cert.pem; ssl_certificate_key $W/key.pem;
    ssl_session_cache off; ssl_session_tickets off;
    server { listen 127.0.0.1:443 ssl; ssl_protocols TLSv1.3; root $W/www; }
    server { listen 127.0.0.1:8443 ssl; ssl_protocols TLSv1.2; root $W/www; }
}
EOF
    # not through nsx: `ip netns exec` execs, so $! is the server's own pid
    ip netns exec "$NS" nginx -c "$W/ngx/nginx.conf" -p "$W/ngx" -g 'daemon off;' &
    NGINX_PID=$!
    for _ in $(seq 1 50); do nsx curl -sk -o /dev/null https://127.0.0.1/ && return; sleep 0.1; done
    echo "nginx did not start: $(cat "$W/ngx/error.log")" >&2; exit 1
}

capture() {  # capture FILE FILTER -- command...
    local f=$1 filter=$2; shift 3
    ip netns exec "$NS" tcpdump -i lo -s 0 -c 2000000 -U -w "$f.part" "$filter" </dev/null >/dev/null 2>&1 &
    TCPDUMP_PID=$!
    sleep 1
    "$@" >/dev/null
    sleep 0.5
    kill "$TCPDUMP_PID"; wait "$TCPDUMP_PID" 2>/dev/null || true; TCPDUMP_PID=
    mv "$f.part" "$f"
}

if [[ -n ${REMAKE:-} || ! -f $PCAPS/tls13_short.pcap || ! -f $PCAPS/tls12_short.pcap || ! -f $PCAPS/tls_long.pcap ]]; then
    echo "making the captures in $PCAPS" >&2
    start_server
    capture "$PCAPS/tls13_short.pcap" "tcp port 443" -- \
        nsx wrk -t1 -c4 -d"${SHORT_SECS}s" -H 'Connection: close' https://127.0.0.1:443/index.html
    capture "$PCAPS/tls12_short.pcap" "tcp port 8443" -- \
        nsx wrk -t1 -c4 -d"${SHORT_SECS}s" -H 'Connection: close' https://127.0.0.1:8443/index.html
    long() { for _ in $(seq 1 "$LONG_N"); do nsx curl -sk -o /dev/null https://127.0.0.1:443/big.bin; done; }
    capture "$PCAPS/tls_long.pcap" "tcp port 443" -- long
fi

cpu_ms() {  # one run's task-clock in ms
    rm -rf "$W/s" "$W/l"
    perf stat -x, -e task-clock -- "$WIRELOG" read -C --quiet --store "$W/s" --logs "$W/l" "$@" 2>&1 >/dev/null \
        | awk -F, '/task-clock/{print $1}'
}
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "REPS=$REPS, off = \`$OFF\`, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $("$WIRELOG" --version 2>/dev/null || echo "$WIRELOG")"
echo
echo "| capture | packets | TLS connections (ssl.log rows) | x509.log rows | CPU ms on / off (median) | ns per TLS connection | ns per packet |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pc in tls13_short tls12_short tls_long; do
    f=$PCAPS/$pc.pcap
    cat "$f" >/dev/null
    on=() off=()
    for _ in $(seq 1 "$REPS"); do
        # shellcheck disable=SC2086
        on+=("$(cpu_ms "$f")"); off+=("$(cpu_ms $OFF "$f")")
    done
    m_on=$(printf '%s\n' "${on[@]}" | median); m_off=$(printf '%s\n' "${off[@]}" | median)
    rm -rf "$W/s" "$W/l"; "$WIRELOG" read -C --quiet --store "$W/s" --logs "$W/l" "$f" >/dev/null 2>&1
    conns=$(grep -vc '^#' "$W/l/ssl.log" 2>/dev/null || true)
    certs=$(grep -vc '^#' "$W/l/x509.log" 2>/dev/null || true)
    pkts=$(capinfos -M -c "$f" | awk '/Number of packets/{print $NF}')
    awk -v pc="$pc" -v p="$pkts" -v c="$conns" -v x="$certs" -v a="$m_on" -v b="$m_off" 'BEGIN{
        printf "| %s | %d | %d | %d | %.1f / %.1f | %.0f | %.1f |\n", pc, p, c, x, a, b,
               c ? (a-b)*1e6/c : 0, (a-b)*1e6/p }'
    echo "runs on: ${on[*]}; off: ${off[*]}" >&2
done
