#!/bin/bash
# bench/record_h2.sh - records the captures of BENCHMARKS.md's "HTTP/2 streams and gRPC calls beside
# HTTP/1" rows, so bench/tx_cost.sh can measure them again:
#   h2bench.pcap    h2load -n 20000 -c 10 -m 10 against nghttpd --no-tls (a 512-byte file)
#   h1bench.pcap    h2load --h1 -n 20000 -c 10 -m 1 against nginx (the same file)
#   grpcbench.pcap  5,000 sequential unary calls (Echo) of a Python grpcio client on one channel
# Each is made in a private network namespace on its loopback (tcpdump -i lo, snaplen 65535), so
# nothing leaves the machine. Then: WIRELOG_PEERS_DIR=$OUT PCAPS="h2bench grpcbench h1bench" bench/tx_cost.sh
# usage: bench/record_h2.sh [OUT]   (default target/wirelog-peers; the captures go in OUT/pcaps)
# Needs root, ip, tcpdump, nghttp2-server (nghttpd), nghttp2-client (h2load), nginx, python3 with
# grpcio and grpcio-tools (scripts/test.sh installs them).
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
OUT=${1:-${WIRELOG_PEERS_DIR:-$REPO/target/wirelog-peers}}
mkdir -p "$OUT/pcaps"
for t in ip tcpdump nghttpd h2load nginx python3; do
    command -v "$t" >/dev/null || { echo "record_h2.sh: $t is not installed" >&2; exit 1; }
done
python3 -c 'import grpc, grpc_tools' 2>/dev/null || { echo "record_h2.sh: python3 grpcio and grpcio-tools are not installed" >&2; exit 1; }

NS=wlh2rec$$
W=$(mktemp -d /tmp/wirelog-recordh2.XXXXXX)
PIDS=()
cleanup() {
    # Only what this script started, by PID.
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
inns() { ip netns exec "$NS" "$@"; }

# Waits (at most 10 s) until something listens on 127.0.0.1:$1 in the namespace.
wait_port() {
    for _ in $(seq 100); do
        inns bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "record_h2.sh: nothing listens on port $1; logs in $W" >&2
    exit 1
}

# tcpdump on the namespace's loopback into $1 while "${@:2}" runs. The readiness probes above were
# made before the capture started, so the capture holds only the benchmark's connections.
capture() {
    local pcap=$1; shift
    # `ip netns exec` execs the program: $! is tcpdump itself (a shell function here would not be).
    ip netns exec "$NS" tcpdump -i lo -s 65535 -U -w "$pcap.tmp" 2>"$W/tcpdump.log" &
    local tp=$!
    for _ in $(seq 100); do grep -q "listening on" "$W/tcpdump.log" 2>/dev/null && break; sleep 0.1; done
    "$@"
    # tcpdump may still be reading its socket on a loaded machine: wait until the file stops growing
    # (at most 30 s), then stop it and refuse a capture the kernel dropped packets of.
    local last=-1 size
    for _ in $(seq 60); do
        sleep 0.5
        size=$(stat -c %s "$pcap.tmp")
        [[ $size == "$last" ]] && break
        last=$size
    done
    kill -INT "$tp"
    wait "$tp" || true
    if ! grep -q "^0 packets dropped by kernel" "$W/tcpdump.log"; then
        echo "record_h2.sh: tcpdump lost packets making $pcap: $(cat "$W/tcpdump.log")" >&2
        exit 1
    fi
    mv "$pcap.tmp" "$pcap"
    echo "$(basename "$pcap"): $(tcpdump -r "$pcap" 2>/dev/null | wc -l) packets" >&2
}

head -c 512 /dev/zero | tr '\0' 'x' >"$W/file"

# HTTP/2 cleartext (prior knowledge): nghttpd serving the file, h2load 10 clients x 10 streams.
ip netns exec "$NS" nghttpd --no-tls -d "$W" 8080 >"$W/nghttpd.log" 2>&1 &
PIDS+=($!)
wait_port 8080
capture "$OUT/pcaps/h2bench.pcap" inns h2load -n 20000 -c 10 -m 10 http://127.0.0.1:8080/file >"$W/h2load.log"
grep -E "^requests:" "$W/h2load.log" >&2

# HTTP/1.1 keep-alive: nginx serving the same file, h2load --h1 10 clients, one request in flight each.
cat >"$W/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx.err;
events { worker_connections 256; }
http {
    access_log off;
    keepalive_requests 100000;
    client_body_temp_path $W;
    server { listen 127.0.0.1:8081; root $W; }
}
EOF
ip netns exec "$NS" nginx -c "$W/nginx.conf" >"$W/nginx.log" 2>&1 &
PIDS+=($!)
wait_port 8081
capture "$OUT/pcaps/h1bench.pcap" inns h2load --h1 -n 20000 -c 10 -m 1 http://127.0.0.1:8081/file >"$W/h1load.log"
grep -E "^requests:" "$W/h1load.log" >&2

# gRPC: a grpcio server and 5,000 sequential unary Echo calls on one channel.
cat >"$W/calls.proto" <<'EOF'
syntax = "proto3";
package wlbench;
message Msg { string text = 1; int32 n = 2; }
service Calls { rpc Echo (Msg) returns (Msg); }
EOF
(cd "$W" && python3 -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. calls.proto)
cat >"$W/server.py" <<'EOF'
import grpc
from concurrent import futures
import calls_pb2 as pb, calls_pb2_grpc as rpc
class S(rpc.CallsServicer):
    def Echo(self, m, c): return pb.Msg(text=m.text.upper(), n=len(m.text))
s = grpc.server(futures.ThreadPoolExecutor(4))
rpc.add_CallsServicer_to_server(S(), s)
s.add_insecure_port("127.0.0.1:50051")
s.start(); s.wait_for_termination()
EOF
cat >"$W/client.py" <<'EOF'
import grpc
import calls_pb2 as pb, calls_pb2_grpc as rpc
ch = grpc.insecure_channel("127.0.0.1:50051", options=[("grpc.enable_http_proxy", 0)])
st = rpc.CallsStub(ch)
for k in range(5000):
    st.Echo(pb.Msg(text=f"hello {k}"))
ch.close()
print("5000 calls")
EOF
ip netns exec "$NS" bash -c "cd $W && exec python3 server.py" >"$W/grpc_server.log" 2>&1 &
PIDS+=($!)
wait_port 50051
capture "$OUT/pcaps/grpcbench.pcap" inns bash -c "cd $W && exec python3 client.py" >&2
