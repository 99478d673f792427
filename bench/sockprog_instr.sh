#!/bin/sh
# bench/sockprog_instr.sh - user-space instructions per packet of `wirelog capture` on a veth replay,
# for two binaries alternated (issue 35/36: the socket program must not make IP traffic dearer).
#
# usage: bench/sockprog_instr.sh BEFORE AFTER [PCAP] [REPS]
#   (default PCAP $WIRELOG_PEERS_DIR/pcaps/mysql_text.pcap, REPS 3; root; perf, tcpreplay, ip)
# Per run: two namespaces joined by a veth pair, `valgrind --tool=callgrind` around
# `wirelog capture -i <veth> --user root --workers 1 --logs DIR --no-store` (root: callgrind writes
# its file as the process's user at exit) (no hardware counters in this VM, so
# no `perf stat -e instructions:u`), `tcpreplay --pps $PPS --limit $LIMIT` of PCAP into the other
# end (slow enough for the capture under callgrind: env PPS, default 3000; LIMIT, default 15000
# packets), SIGINT; prints "binary instructions packets instructions/packet" (instructions: every
# thread's, start-up included, the same for both binaries; packets: the capture's own stats line).
set -eu
BEFORE=$1
AFTER=$2
PCAP=${3:-${WIRELOG_PEERS_DIR:-/work/peers}/pcaps/mysql_text.pcap}
REPS=${4:-3}
PPS=${PPS:-3000}
LIMIT=${LIMIT:-15000}
A=wlsi$$a
B=wlsi$$b
W=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT INT TERM
ip netns add "$A"
ip netns add "$B"
ip link add va netns "$A" type veth peer name vb netns "$B"
ip -n "$A" link set va up
ip -n "$B" link set vb up
ip -n "$A" link set lo up
one() {
    bin=$1
    rm -rf "$W/logs"
    rm -f "$W/cg"
    ip netns exec "$A" valgrind -q --tool=callgrind --callgrind-out-file="$W/cg" \
        "$bin" capture -i va --user root --workers 1 --no-store --logs "$W/logs" --stats-interval 0 2>"$W/err" &
    pid=$!
    i=0
    while ! grep -q "capturing on" "$W/err" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 1200 ] || { cat "$W/err"; exit 1; }; sleep 0.05
    done
    ip netns exec "$B" tcpreplay -q --pps "$PPS" --limit "$LIMIT" -i vb "$PCAP" >/dev/null 2>&1
    sleep 1
    # `ip netns exec` became valgrind, which runs the capture itself.
    kill -INT "$pid"
    wait "$pid" || true
    ins=$(grep "^summary:" "$W/cg" | cut -d' ' -f2)
    pk=$(grep "wirelog: stats:" "$W/err" | tail -1 | sed 's/.*stats: \([0-9]*\) packets.*/\1/')
    echo "$bin $ins $pk $(echo "$ins $pk" | awk '{printf "%.0f", $1 / $2}')"
}
for r in $(seq "$REPS"); do
    one "$BEFORE"
    one "$AFTER"
done
