#!/bin/bash
# bench/tap_cost.sh - what a capture socket costs the SENDING threads of loopback, per packet.
#
# On loopback the packet tap (the socket's filter or program, the copy into its ring) runs on the
# thread that sends, so a capture's kernel cost lands on the server it watches. This measures it
# apart from the capturer's own CPU: bench/tap_pingpong.py exchanges N request/response pairs in a
# private network namespace and reports the system CPU of its two processes per packet, with K
# captures running at once (K sockets: the tap's cost K times, above the run-to-run noise), in
# scenarios alternated ROUNDS times:
#   none            no capture
#   tcpdump         K x tcpdump -i lo -s 128 -w /dev/null tcp port PORT (libpcap's classic filter;
#                   loopback copies taken both ways, dropped in user space)
#   wirelog_base    K x $WIRELOG_BASE capture -i lo -f 'tcp port PORT' --snaplen 256 --no-parse
#   wirelog         the same with $WIRELOG
# Prints, per scenario, the median system ns per packet and its excess over `none` per socket.
# usage: WIRELOG=... WIRELOG_BASE=... bench/tap_cost.sh   (env: K=8 N=200000 ROUNDS=5 REQ=100
#        RESP=300 SCENARIOS="none tcpdump wirelog_base wirelog" BPF_STATS=1: also ns per run of the
#        wirelog processes' socket programs, from their fdinfo)
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
K=${K:-8}; N=${N:-200000}; ROUNDS=${ROUNDS:-5}; PORT=${PORT:-5555}; REQ=${REQ:-100}; RESP=${RESP:-300}
SCENARIOS=${SCENARIOS:-"none tcpdump wirelog_base wirelog"}
WIRELOG=${WIRELOG:-$REPO/target/release/wirelog}
NS=wl_tap$$
OUT=$REPO/bench/out; mkdir -p "$OUT"; CSV=$OUT/tap_cost.csv
TMP=$(mktemp -d /tmp/wirelog-tapcost.XXXXXX)
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    ip netns del "$NS" 2>/dev/null
    [[ -n ${OLD_STATS:-} ]] && sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"
    rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$NS"; ip -n "$NS" link set lo up
if [[ ${BPF_STATS:-} == 1 ]]; then OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled); sysctl -qw kernel.bpf_stats_enabled=1; fi

start() {   # scenario -> fills PIDS with its K captures, waits until each is capturing
    local sc=$1 i bin
    PIDS=()
    [[ $sc == none ]] && return
    for i in $(seq 1 "$K"); do
        case $sc in
        tcpdump) ip netns exec "$NS" tcpdump -i lo -Z root -s 128 -w /dev/null tcp port "$PORT" 2>"$TMP/err$i" & ;;
        wirelog|wirelog_base)
            bin=$WIRELOG; [[ $sc == wirelog_base ]] && bin=${WIRELOG_BASE:?set WIRELOG_BASE}
            ip netns exec "$NS" "$bin" capture -i lo --user root -f "tcp port $PORT" --snaplen 256 --ring-size 1M \
                --no-parse --no-store --logs "$TMP/logs$i" 2>"$TMP/err$i" & ;;
        *) echo "unknown scenario $sc" >&2; exit 1 ;;
        esac
        PIDS+=("$!")
    done
    for i in $(seq 1 "$K"); do
        for _ in $(seq 1 100); do grep -Eq 'listening on|capturing on' "$TMP/err$i" 2>/dev/null && break; sleep 0.1; done
    done
}
stop() {
    local p
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
prog_ns() {   # runs and ns of the socket programs the running captures hold
    local r=0 t=0 p f a b
    for p in "${PIDS[@]}"; do
        for f in /proc/"$p"/fdinfo/*; do
            read -r a b < <(awk '/^prog_type:/{q=1} /^run_time_ns:/{t=$2} /^run_cnt:/{c=$2} END{if (q) print c + 0, t + 0; else print 0, 0}' "$f" 2>/dev/null || echo 0 0)
            r=$((r + a)); t=$((t + b))
        done
    done
    echo "$r $t"
}

echo "round,scenario,k,packets,sys_s,user_s,sys_ns_per_packet,prog_runs,prog_ns,loadavg1" >"$CSV"
for round in $(seq 1 "$ROUNDS"); do
    for sc in $SCENARIOS; do
        start "$sc"
        line=$(ip netns exec "$NS" python3 "$REPO/bench/tap_pingpong.py" "$N" "$PORT" "$REQ" "$RESP")
        read -r pr pn < <(prog_ns)
        stop
        pk=$(sed -E 's/.*packets=([0-9]+).*/\1/' <<<"$line"); sy=$(sed -E 's/.*sys_s=([0-9.]+).*/\1/' <<<"$line")
        us=$(sed -E 's/.*user_s=([0-9.]+).*/\1/' <<<"$line"); ns=$(sed -E 's/.*sys_ns_per_packet=([0-9]+).*/\1/' <<<"$line")
        echo "$round,$sc,$K,$pk,$sy,$us,$ns,$pr,$pn,$(cut -d' ' -f1 /proc/loadavg)" >>"$CSV"
        echo "round $round $sc: $line programs: $pr runs $pn ns" >&2
    done
done
python3 - "$CSV" "$K" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]))); k = int(sys.argv[2])
scen = list(dict.fromkeys(r["scenario"] for r in rows))
med = lambda sc, f: statistics.median(f(r) for r in rows if r["scenario"] == sc)
base = med("none", lambda r: float(r["sys_ns_per_packet"])) if "none" in scen else float("nan")
print(f"| scenario | runs | sender system ns per packet (median; rounds) | above none, per capture socket | socket program ns per run |")
print("|---|---:|---:|---:|---:|")
for sc in scen:
    v = [r["sys_ns_per_packet"] for r in rows if r["scenario"] == sc]
    m = med(sc, lambda r: float(r["sys_ns_per_packet"]))
    runs = [float(r["prog_ns"]) / float(r["prog_runs"]) for r in rows if r["scenario"] == sc and r["prog_runs"] not in ("", "0")]
    pr = f"{statistics.median(runs):.1f}" if runs else "-"
    print(f"| {sc} | {len(v)} | {m:.0f} ({', '.join(v)}) | {(m - base) / k if sc != 'none' else 0:.0f} | {pr} |")
PY
