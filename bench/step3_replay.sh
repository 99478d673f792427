#!/bin/bash
# bench/step3_replay.sh - `capture --cpu-budget` step 3 (kernel accounting) on the sysbench MySQL
# capture replayed in two parts with a quiet spell between (issue 35, BENCHMARKS.md "Step 3 where
# it did not engage"): the rows measured there by hand, and the steps of tests/capture_live.rs
# `cpu_budget_step3_counts_connections_step_1b_stopped`. The capture is cut to the 9000-byte veth
# and its empty TCP segments left out by tests/fit_segments.py (HOLES=1: not cut, only split with
# editcap, so every segment above the MTU is a hole in the replayed stream), part 1 (PARTS' first
# number of packets) is replayed at PPS packets/s (PPS=top: --topspeed), QUIET seconds of quiet,
# then part 2, then 3 s; captured from the other end of the veth by BIN with --cpu-budget BUDGET
# and a ring of RING, ROUNDS times. Per run: the capture's CPU (utime + stime of /proc/PID/stat) from
# the first replay to 3 s after the second, and the summary lines (what was shed, the stats, the
# kernel accounting line: packets counted in the kernel, map calls, entries written, resumptions).
# usage: PCAP=/work/peers/pcaps/mysql.pcap BIN=target/release/wirelog BUDGET=0.4% PARTS="80000 40000" \
#        QUIET=4 PPS=10000 HOLES=0 RING=256M ROUNDS=1 [EXTRA="--no-parse"] bench/step3_replay.sh
#        (as root; appends to bench/out/step3_replay.txt)
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
PCAP=${PCAP:-$REPO/target/wirelog-peers/pcaps/mysql.pcap}
BIN=${BIN:-$REPO/target/release/wirelog}
BUDGET=${BUDGET:-0.4%}
PARTS=${PARTS:-"80000 40000"}
QUIET=${QUIET:-4}
PPS=${PPS:-10000}
HOLES=${HOLES:-0}
RING=${RING:-256M}
ROUNDS=${ROUNDS:-1}
EXTRA=${EXTRA:-}
OUT=$REPO/bench/out
mkdir -p "$OUT"
[[ -f $PCAP ]] || { echo "no capture $PCAP (cargo test --release --test capture_live cpu_budget generates it)" >&2; exit 1; }
ID=$$
A=wls3a$ID B=wls3b$ID VA=ws3a$ID VB=ws3b$ID
WORK=$(mktemp -d /tmp/wirelog-step3.XXXXXX)
source "$REPO/bench/replay_veth.sh"
read -r N1 N2 <<<"$PARTS"
P1=$WORK/part1.pcap P2=$WORK/part2.pcap
if [[ $HOLES == 1 ]]; then
    editcap -r "$PCAP" "$P1" "1-$N1"
    editcap -r "$PCAP" "$P2" "$((N1 + 1))-$((N1 + N2))"
else
    python3 "$REPO/tests/fit_segments.py" "$PCAP" --mtu 9000 --parts "$N1" "$N2" "$P1" "$P2" >/dev/null
fi
veth_up
rate=(--pps "$PPS")
[[ $PPS == top ]] && rate=(--topspeed)
REPORT=$OUT/step3_replay.txt
echo "# $(date -u +%FT%TZ) $BIN: budget $BUDGET, parts $PARTS of $PCAP (holes $HOLES) at $PPS, quiet $QUIET s, ring $RING $EXTRA; load: $(uptime)" | tee -a "$REPORT"
for round in $(seq 1 "$ROUNDS"); do
    d=$WORK/r$round
    mkdir -p "$d/logs"
    ip netns exec "$A" "$BIN" capture -i "$VA" --user root --ring-size "$RING" --no-store --logs "$d/logs" \
        --cpu-budget "$BUDGET" $EXTRA 2>"$d/err" &
    CAP_PID=$!
    for _ in $(seq 100); do grep -q "capturing on" "$d/err" && break; sleep 0.1; done
    sleep 0.3
    kill -0 "$CAP_PID" 2>/dev/null || { echo "the capture ended:" >&2; cat "$d/err" >&2; exit 1; }
    c0=$(cpu_ticks "$CAP_PID")
    t0=$(date +%s.%N)
    ip netns exec "$B" tcpreplay "${rate[@]}" -q -i "$VB" "$P1" >/dev/null
    sleep "$QUIET"
    ip netns exec "$B" tcpreplay "${rate[@]}" -q -i "$VB" "$P2" >/dev/null
    sleep 3
    c1=$(cpu_ticks "$CAP_PID")
    t1=$(date +%s.%N)
    kill -INT "$CAP_PID"
    wait "$CAP_PID" || true
    CAP_PID=
    cpu=$(echo "($c1 - $c0) / $HZ" | bc -l)
    win=$(echo "$t1 - $t0" | bc -l)
    printf 'round %s: capture CPU %.3f s over %.1f s (%.3f%% of a core)\n' "$round" "$cpu" "$win" "$(echo "$cpu / $win * 100" | bc -l)" | tee -a "$REPORT"
    grep -E "cpu budget .*: the process|wirelog: stats:|wirelog: kernel accounting:" "$d/err" | tail -3 | sed 's/^/    /' | tee -a "$REPORT"
done
