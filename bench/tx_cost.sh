#!/bin/bash
# bench/tx_cost.sh - what one application transaction costs `wirelog read` beyond the packet path:
# (CPU with parsing - CPU with --no-parse) / transactions, on the MySQL and HTTP captures, with the
# store and logs written as by default. CPU is perf's task-clock (mean of REPS runs); with
# CALLGRIND=1 also instructions per transaction (valgrind, independent of machine load), with
# HEAPTRACK=1 heap allocations per transaction (whole process). Compare two builds by running it
# with WIRELOG=path/to/other/wirelog.
# usage: bench/tx_cost.sh   (env: WIRELOG, PCAPS="mysql_text mysql http", REPS=5, CALLGRIND, HEAPTRACK)
# Captures missing from $PEERS are made where a script can: mongodb, memcached_bin, pgsql, redis,
# mqtt_gen, amqp_gen, dns_gen with bench/gen_wire.py (20,000 transactions); kafka from tests/data/kafka-kraft-4.1.1.pcap x200 with
# `wirelog-bench scale` (addresses rewritten per copy); h2bench, grpcbench, h1bench: bench/record_h2.sh.
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
WIRELOG=${WIRELOG:-$REPO/target/release/wirelog}
PEERS=${WIRELOG_PEERS_DIR:-$REPO/target/wirelog-peers}/pcaps
PCAPS=${PCAPS:-"mysql_text mysql http"}
REPS=${REPS:-5}
W=$(mktemp -d /tmp/wirelog-txcost.XXXXXX)
trap 'rm -rf "$W"' EXIT
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }

run() { rm -rf "$W/s" "$W/l"; "$WIRELOG" read -C --quiet --store "$W/s" --logs "$W/l" "$@" >/dev/null 2>&1; }
export -f run; export WIRELOG W

echo "| capture | transactions | CPU ms parse / no-parse | µs per transaction |${CALLGRIND:+ instructions per transaction |}${HEAPTRACK:+ allocations per transaction |}"
echo "|---|---:|---:|---:|${CALLGRIND:+---:|}${HEAPTRACK:+---:|}"
for pc in $PCAPS; do
    f=$PEERS/$pc.pcap
    if [[ ! -f $f ]]; then
        mkdir -p "$PEERS"
        case $pc in
            mongodb|memcached_bin|pgsql|redis|mqtt_gen|amqp_gen|dns_gen) python3 "$REPO/bench/gen_wire.py" "${pc%_gen}" 20000 "$f" ;;
            kafka) "${WIRELOG_BENCH:-$REPO/target/release/wirelog-bench}" scale --copies 200 \
                       "$REPO/tests/data/kafka-kraft-4.1.1.pcap" "$f" >/dev/null ;;
            h2bench|grpcbench|h1bench) echo "missing $f (make it with bench/record_h2.sh $(dirname "$PEERS"))" >&2; continue ;;
            *) echo "missing $f (make it with ../shared/bench/gen_*.sh or bench/run)" >&2; continue ;;
        esac
    fi
    ms() { perf stat -r "$REPS" -x, -e task-clock -- bash -c "run $* $f" 2>&1 >/dev/null | awk -F, '/task-clock/{print $1}'; }
    parse=$(ms); noparse=$(ms --no-parse)
    run "$f"
    tx=$(cat "$W"/l/{http,mysql,pgsql,redis,dns,memcached,mongodb,mqtt,amqp,kafka,grpc,cassandra}.log 2>/dev/null | grep -vc '^#' || true)
    row="| $pc | $tx | $(printf '%.0f / %.0f' "$parse" "$noparse") | $(awk -v a="$parse" -v b="$noparse" -v n="$tx" 'BEGIN{printf "%.2f", (a-b)*1000/n}') |"
    if [[ -n ${CALLGRIND:-} ]]; then
        ir() { rm -rf "$W/s" "$W/l"; valgrind --tool=callgrind --callgrind-out-file=/dev/null "$WIRELOG" read -C --quiet \
                   --store "$W/s" --logs "$W/l" "$@" "$f" 2>&1 >/dev/null | grep -o 'Collected : [0-9]*' | grep -o '[0-9]*' | tail -1; }
        a=$(ir); b=$(ir --no-parse)
        row+=" $(( (a - b) / tx )) |"
    fi
    if [[ -n ${HEAPTRACK:-} ]]; then
        al() { rm -rf "$W/s" "$W/l"; heaptrack -o "$W/ht" "$WIRELOG" read -C --quiet --store "$W/s" --logs "$W/l" "$@" "$f" >/dev/null 2>&1
               heaptrack_print "$W"/ht.* 2>/dev/null | awk '/^calls to allocation functions:/{print $5}'; rm -f "$W"/ht.*; }
        a=$(al); b=$(al --no-parse)
        row+=" $(awk -v a="$a" -v b="$b" -v n="$tx" 'BEGIN{printf "%.2f", (a-b)/n}') |"
    fi
    echo "$row"
done
