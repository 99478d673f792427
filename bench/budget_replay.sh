#!/bin/bash
# bench/budget_replay.sh - `capture --cpu-budget` on a replay (issue 35): the sysbench MySQL capture
# (or any PCAP) replayed LOOPS times at top speed from one network namespace into a veth captured in
# another, by each binary of BINS in turn (alternated, ROUNDS rounds), with BUDGET. Per run: packets
# sent, the capture's CPU (utime + stime of /proc/PID/stat) from the start of the replay to 2 s after
# its end, the summary line of what was shed, the stats line, and the mysql.log rows with their summed
# sample_weight (the estimate of the transactions).
# usage: PCAP=target/wirelog-peers/pcaps/mysql.pcap BINS="base=/path/a new=/path/b" BUDGET=3% \
#        ROUNDS=2 LOOPS=3 RING=8M [EXTRA="--no-parse"] bench/budget_replay.sh   (as root; writes bench/out/budget_replay.txt)
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
PCAP=${PCAP:-$REPO/target/wirelog-peers/pcaps/mysql.pcap}
BINS=${BINS:-"new=$REPO/target/release/wirelog"}
BUDGET=${BUDGET:-3%}
ROUNDS=${ROUNDS:-2}
LOOPS=${LOOPS:-3}
RING=${RING:-8M}
EXTRA=${EXTRA:-}
OUT=$REPO/bench/out
mkdir -p "$OUT"
[[ -f $PCAP ]] || { echo "no capture $PCAP (cargo test --release --test capture_live cpu_budget generates it)" >&2; exit 1; }
ID=$$
A=wlbra$ID B=wlbrb$ID VA=wbra$ID VB=wbrb$ID
WORK=$(mktemp -d /tmp/wirelog-budget-replay.XXXXXX)
source "$REPO/bench/replay_veth.sh"
veth_up
REPORT=$OUT/budget_replay.txt
{
    echo "# $(date -u +%FT%TZ) budget $BUDGET, $LOOPS loops of $PCAP, ring $RING; load: $(uptime)"
} | tee -a "$REPORT"
for round in $(seq 1 "$ROUNDS"); do
    for spec in $BINS; do
        name=${spec%%=*} bin=${spec#*=}
        d=$WORK/$name$round
        mkdir -p "$d/logs"
        ip netns exec "$A" "$bin" capture -i "$VA" --user root --ring-size "$RING" --no-store --logs "$d/logs" \
            --cpu-budget "$BUDGET" $EXTRA 2>"$d/err" &
        CAP_PID=$!
        for _ in $(seq 100); do grep -q "capturing on" "$d/err" && break; sleep 0.1; done
        sleep 0.3
        kill -0 "$CAP_PID" 2>/dev/null || { echo "$name: the capture ended:" >&2; cat "$d/err" >&2; exit 1; }
        c0=$(cpu_ticks "$CAP_PID")
        t0=$(date +%s.%N)
        sent=$(ip netns exec "$B" tcpreplay --topspeed --loop "$LOOPS" -i "$VB" "$PCAP" 2>&1 | awk '/Actual:/{print $2}')
        t1=$(date +%s.%N)
        sleep 2
        c1=$(cpu_ticks "$CAP_PID")
        t2=$(date +%s.%N)
        kill -INT "$CAP_PID"
        wait "$CAP_PID" || true
        CAP_PID=
        cpu=$(echo "($c1 - $c0) / $HZ" | bc -l)
        win=$(echo "$t2 - $t0" | bc -l)
        rows=0 est=0
        if [[ -f $d/logs/mysql.log ]]; then
            read -r rows est < <(awk -F'\t' '/^#fields/{for(i=2;i<=NF;i++) if($i=="sample_weight") w=i-1; next} /^#/{next} {n++; s+=(w && $w!="-" ? $w : 1)} END{print n+0, s+0}' "$d/logs/mysql.log")
        fi
        printf '%s round %s: %s packets sent in %.2f s; capture CPU %.2f s over %.2f s (%.2f%% of a core, limit %s x (window + 0.5 s)); mysql.log %s rows, estimate %s\n' \
            "$name" "$round" "$sent" "$(echo "$t1 - $t0" | bc -l)" "$cpu" "$win" "$(echo "$cpu / $win * 100" | bc -l)" "$BUDGET" "$rows" "$est" | tee -a "$REPORT"
        grep -E "cpu budget .*: the process|wirelog: stats:|wirelog: kernel accounting:" "$d/err" | tail -3 | sed 's/^/    /' | tee -a "$REPORT"
    done
done
