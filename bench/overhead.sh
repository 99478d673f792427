#!/bin/bash
# bench/overhead.sh - what capturing costs a busy MariaDB: sysbench oltp_read_only (4 threads,
# unthrottled) over loopback inside a private network namespace, with each capture running in the
# same namespace, interleaved and repeated ROUNDS times (the method of
# ../shared/bench/bench_overhead.sh, whose helpers are used in place):
#   none              no capture
#   tcpdump_w         tcpdump -i lo -w FILE tcp port 3306 (ring of 2 x 100 MB files)
#   tcpdump_s128      the same with -s 128
#   tcpdump_s128_null as tcpdump_s128, written to /dev/null (the same tap, no file, no page cache or
#                     writeback on the machine's CPUs)
#   tap_only          tcpdump -i lo -w /dev/null tcp port 1: a packet socket whose filter takes
#                     nothing, i.e. what the kernel's tap costs before any packet reaches user space
#   wirelog           wirelog capture -i lo: conns, flows and MySQL statements (mysql.log and the store)
#   wirelog_noparse   the same with --no-parse (conns and flows only)
#   wirelog_snap256   as wirelog, with --snaplen 256 (the ring takes the first 256 bytes of a packet)
#   wirelog_snap128   as wirelog, with --snaplen 128 (tcpdump_s128's snap length)
#   wirelog_snap256_noparse  as wirelog_snap256, with --no-parse (the capturer's own CPU mostly gone)
#   wirelog_base_snap256  as wirelog_snap256, with the binary WIRELOG_BASE (A/B of the capture path)
#   wirelog_snap256_batch  as wirelog_snap256, run under `chrt --batch 0` (SCHED_BATCH: its wakeups
#                     do not preempt the server's threads)
#   wirelog_snap256_ring2m   as wirelog_snap256, with --ring-size 2M (libpcap's default buffer, which
#                     tcpdump_s128 uses: a ring the kernel's copies keep in the cache)
#   wirelog_kacct     as wirelog, with --kernel-accounting (issue 18) and without the kernel filter,
#                     which the option cannot be combined with (the namespace carries only MySQL)
#   wirelog_noparse_kacct  as wirelog_noparse, with --kernel-accounting
#   wirelog_pcap      wirelog with --pcap-dir: every packet kept (ring of 2 x 100 MB files)
#   wirelog_pcap16k   the same with --pcap-cutoff 16K
#   wirelog_base      as wirelog, with the binary WIRELOG_BASE (another commit, for A/B in one run)
#   wirelog_sockdata  as wirelog, with --socket-data (issue 32): statements from the socket system calls
#                     of both ends (the packet path still parses; its copies are dropped at the join)
#   wirelog_sockdata_noparse  --no-parse --socket-data: conns from the packets, statements from the
#                     socket only (the packet path parses nothing)
#   wirelog_sockdata_server   as wirelog_sockdata_noparse, with --socket-data mariadbd (the server's
#                     end only: one event per message instead of two)
#   wirelog_budget2   as wirelog, with --cpu-budget 2% (issue 35): what the budget sheds and what it saves
#   wirelog_base_budget2  as wirelog_budget2, with the binary WIRELOG_BASE (A/B of the budget's steps)
# Reports TPS and p95 latency relative to no capture, the worst one-second TPS, the server's CPU
# per statement, the capturer's CPU seconds and the bytes it left on disk (pcap files, logs and
# store).
# PERF_ROUND=N: in round N, `perf record -a -g` over 10 s of each scenario's run, into
# bench/out/perf_<scenario>.data (read with `perf report -i F --comm mariadbd --no-children`).
# Beside the medians, per statement: the server's user and system CPU apart, sysbench's system CPU
# (the client's sends, on loopback the tap's work for its packets), the machine's context switches
# and interrupts (/proc/stat), and with BPF_STATS=1 (sets kernel.bpf_stats_enabled for the run) the
# ns per packet of the capturer's socket programs (run_time_ns / run_cnt of its fdinfo).
# usage: bench/overhead.sh   (env: SB_TIME=30 ROUNDS=3 SCENARIOS="..." PERF_ROUND= BPF_STATS=)
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
NS=${NS:-wl_ovh$$}
PEERS_DIR=${PEERS_DIR:-$REPO/target/wirelog-peers}
source "$REPO/../shared/bench/common.sh"

SB_TIME=${SB_TIME:-30}
SB_THREADS=${SB_THREADS:-4}
ROUNDS=${ROUNDS:-3}
SCENARIOS=${SCENARIOS:-"none tcpdump_w tcpdump_s128 wirelog wirelog_noparse wirelog_pcap wirelog_pcap16k"}
WIRELOG=${WIRELOG:-$REPO/target/release/wirelog}
OUT=$REPO/bench/out
mkdir -p "$OUT"
[[ -x $WIRELOG ]] || { echo "build first: cargo build --release" >&2; exit 1; }

install_pkgs "${PKGS_ALL[@]}"
ensure_ns
start_mariadb
sysbench_prepare
OV=$(mktemp -d /tmp/wirelog-overhead.XXXXXX)
EXTRA_CLEANUP+=("rm -rf $OV")
CSV=$OUT/overhead_runs.csv
echo "round,scenario,tps,qps,lat_avg_ms,lat_p95_ms,capture_cpu_s,mariadbd_cpu_s,capture_rss_mb,loadavg1,min_tps_1s,disk_mb,mysql_rows,mysql_weighted,server_statements,mariadbd_user_s,mariadbd_sys_s,sysbench_user_s,sysbench_sys_s,ctxt,intr,prog_runs,prog_ns" >"$CSV"
if [[ ${BPF_STATS:-} == 1 ]]; then
    old_stats=$(sysctl -n kernel.bpf_stats_enabled)
    sysctl -qw kernel.bpf_stats_enabled=1
    EXTRA_CLEANUP+=("sysctl -qw kernel.bpf_stats_enabled=$old_stats")
fi

# SB_TIMED=FILE: sysbench's user and system CPU seconds into FILE (/usr/bin/time).
sb() { ${SB_TIMED:+/usr/bin/time -f "%U %S" -o "$SB_TIMED"} ip netns exec "$NS" sysbench oltp_read_only "${SB_MYSQL[@]}" --tables="$SB_TABLES" --table-size="$SB_ROWS" \
          --threads="$SB_THREADS" --percentile=95 --report-interval=1 "$@"; }
# CPU of a process and all its threads (utime + stime), in ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# User and system ticks apart.
cpu_split() { awk '{print $14, $15}' "/proc/$1/stat" 2>/dev/null || echo 0 0; }
# The machine's context switches and interrupts so far.
sys_counts() { awk '/^ctxt/{c=$2} /^intr/{i=$2} END{print c, i}' /proc/stat; }
# Runs and ns of the socket programs a process holds (fdinfo; counted while bpf_stats_enabled).
prog_stats() {
    local f r=0 t=0 a b
    for f in /proc/"$1"/fdinfo/*; do
        read -r a b < <(awk '/^prog_type:/{p=1} /^run_time_ns:/{t=$2} /^run_cnt:/{c=$2} END{if (p) print c + 0, t + 0; else print 0, 0}' "$f" 2>/dev/null || echo 0 0)
        r=$((r + a)); t=$((t + b))
    done
    echo "$r $t"
}
rss_mb() { awk '/VmHWM/{printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo -; }
HZ=$(getconf CLK_TCK)
# The server's own count of statements, read before and after each run: `Questions` (statements
# clients sent, a prepared statement once per execution; the Com_* counters count an execution
# twice, as Com_stmt_execute and as its verb), less the SHOW STATUS that reads it.
server_statements() {
    nsx mariadb --no-defaults -uroot --socket="$MYSQL_SOCK" -N -e "SHOW GLOBAL STATUS LIKE 'Questions'" |
        awk '{print $2 - 1}'
}

log "warm-up 10 s"
sb --time=10 run >/dev/null

start_capture_scenario() {   # scenario -> sets CAP_PID (or empty)
    local sc=$1
    rm -rf "${OV:?}"/*
    case $sc in
    none) CAP_PID=""; return ;;
    tcpdump_w)    ip netns exec "$NS" tcpdump -i lo -Z root -s 0 -C 100 -W 2 -w "$OV/cap" tcp port "$MYSQL_PORT" 2>"$OV/cap.err" & ;;
    tap_only)     ip netns exec "$NS" tcpdump -i lo -Z root -w /dev/null tcp port 1 2>"$OV/cap.err" & ;;
    tcpdump_s128_null) ip netns exec "$NS" tcpdump -i lo -Z root -s 128 -w /dev/null tcp port "$MYSQL_PORT" 2>"$OV/cap.err" & ;;
    tcpdump_s128) ip netns exec "$NS" tcpdump -i lo -Z root -s 128 -C 100 -W 2 -w "$OV/cap" tcp port "$MYSQL_PORT" 2>"$OV/cap.err" & ;;
    wirelog)      ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_snap256) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 256 --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_snap128) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 128 --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_snap256_noparse) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 256 --no-parse --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_base_snap256) ip netns exec "$NS" "${WIRELOG_BASE:?set WIRELOG_BASE}" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 256 --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_snap256_batch) ip netns exec "$NS" chrt --batch 0 "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 256 --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_snap256_ring2m) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --snaplen 256 --ring-size 2M --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_base) ip netns exec "$NS" "${WIRELOG_BASE:?set WIRELOG_BASE}" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_budget2) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --cpu-budget 2% --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_base_budget2) ip netns exec "$NS" "${WIRELOG_BASE:?set WIRELOG_BASE}" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --cpu-budget 2% --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_noparse) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --no-parse --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_kacct) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root \
                      --kernel-accounting --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_noparse_kacct) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root \
                      --no-parse --kernel-accounting --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_pcap) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --store "$OV/store" --logs "$OV/logs" --pcap-dir "$OV/pcap" --pcap-file-size 100M \
                      --pcap-keep count=2 2>"$OV/cap.err" & ;;
    wirelog_pcap16k) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --store "$OV/store" --logs "$OV/logs" --pcap-dir "$OV/pcap" --pcap-file-size 100M \
                      --pcap-keep count=2 --pcap-cutoff 16K 2>"$OV/cap.err" & ;;
    wirelog_sockdata) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --socket-data --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_sockdata_noparse) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --no-parse --socket-data --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    wirelog_sockdata_server) ip netns exec "$NS" "$WIRELOG" capture -i lo --user root --filter "tcp port $MYSQL_PORT" \
                      --no-parse --socket-data mariadbd --store "$OV/store" --logs "$OV/logs" 2>"$OV/cap.err" & ;;
    *) echo "unknown scenario $sc" >&2; exit 1 ;;
    esac
    CAP_PID=$!; PIDS+=("$CAP_PID")
    for _ in $(seq 1 50); do grep -Eq 'listening on|capturing on' "$OV/cap.err" 2>/dev/null && break; sleep 0.1; done
    kill -0 "$CAP_PID" 2>/dev/null || { echo "scenario $sc: the capture exited: $(cat "$OV/cap.err")" >&2; exit 1; }
}

for round in $(seq 1 "$ROUNDS"); do
    for sc in $SCENARIOS; do
        start_capture_scenario "$sc"
        load=$(cut -d' ' -f1 /proc/loadavg)
        q0=$(server_statements)
        m0=$(cpu_ticks "$MYSQL_PID"); c0=0; [[ -n $CAP_PID ]] && c0=$(cpu_ticks "$CAP_PID")
        read -r mu0 ms0 < <(cpu_split "$MYSQL_PID"); read -r x0 i0 < <(sys_counts)
        cp /proc/interrupts "$OV/irq0"
        PERF_PID=""
        if [[ ${PERF_ROUND:-} == "$round" ]]; then
            # 10 s in the middle of the run (2 s in), the whole machine, call graphs.
            (sleep 2; exec perf record -q -a -g -o "$OUT/perf_$sc.data" -- sleep 10) >/dev/null 2>&1 &
            PERF_PID=$!; PIDS+=("$PERF_PID")
        fi
        SB_TIMED=$OV/sb.time sb --time="$SB_TIME" run >"$OV/sb.txt"
        [[ -n $PERF_PID ]] && wait "$PERF_PID" 2>/dev/null || true
        m1=$(cpu_ticks "$MYSQL_PID"); c1=0; rss=-
        read -r mu1 ms1 < <(cpu_split "$MYSQL_PID"); read -r x1 i1 < <(sys_counts)
        # Interrupts by kind over the run (local timer, rescheduling and function-call IPIs, TLB
        # shootdowns, ...), both CPUs summed: bench/out/overhead_irq_<scenario>_round<N>.txt.
        awk 'NR == FNR { if (FNR > 1) { k = $1; s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; a[k] = s } next }
             FNR > 1 { k = $1; s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; d = s - a[k]
                       if (d > 0) { $1 = ""; n = split($0, f, " "); name = ""; for (j = i - 1; j <= n; j++) name = name " " f[j]; printf "%s %d%s\n", k, d, name } }' \
            "$OV/irq0" /proc/interrupts >"$OUT/overhead_irq_${sc}_round$round.txt" || true
        read -r su ss < "$OV/sb.time"
        pr=0; pn=0; [[ -n $CAP_PID ]] && read -r pr pn < <(prog_stats "$CAP_PID")
        q1=$(server_statements)
        if [[ -n $CAP_PID ]]; then
            c1=$(cpu_ticks "$CAP_PID"); rss=$(rss_mb "$CAP_PID")
            # The capturer's wakeups over its life (context switches of all its
            # threads): each one the kernel's wakeup of a sleeping reader, often
            # done on the server's own thread when it retires a block.
            csw=$(cat /proc/"$CAP_PID"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/{v+=$2} /^nonvoluntary_ctxt_switches/{n+=$2} END{print v + 0 "+" n + 0}')
            log "  $sc: capturer context switches (voluntary+involuntary): $csw"
            kill -INT "$CAP_PID"; wait "$CAP_PID" 2>/dev/null || true
        fi
        f=$OV/sb.txt
        tps=$(awk '/transactions:/{gsub(/\(/,"",$3); print $3}' "$f")
        qps=$(awk '/queries:/ && /per sec/{gsub(/\(/,"",$3); print $3}' "$f")
        avg=$(awk '/avg:/{print $2}' "$f")
        p95=$(awk '/95th percentile:/{print $3}' "$f")
        # The worst one-second interval (the stalls a page-cache flush causes).
        mintps=$(awk '/^\[ *[0-9]+s \]/{for (i = 1; i < NF; i++) if ($i == "tps:") print $(i + 1)}' "$f" | sort -n | head -1)
        # Disk bytes the capturer wrote (deleted ring files not counted: a lower bound).
        disk=$(du -sm "$OV" 2>/dev/null | cut -f1)
        ccpu=$(echo "scale=2; ($c1 - $c0) / $HZ" | bc)
        mcpu=$(echo "scale=2; ($m1 - $m0) / $HZ" | bc)
        txs=-; est=-
        if [[ $sc == wirelog* ]]; then
            # Records, and the sum of their sample_weight (the estimate of every statement).
            read -r txs est < <(awk -F'\t' '/^#fields/{for(i=2;i<=NF;i++) if($i=="sample_weight") w=i-1; next} /^#/{next} {n++; s+=(w && $w!="-" ? $w : 1)} END{print n+0, s+0}' "$OV/logs/mysql.log" 2>/dev/null || echo "0 0")
            log "  wirelog: $(grep -E 'stopped by|stats:|pcap:|cpu budget' "$OV/cap.err" | tail -4 | tr '\n' ' ') mysql.log records: $txs, summed weights: $est, server statements: $((q1 - q0))"
            grep -E '^wirelog: socket-data: [0-9]' "$OV/cap.err" | sed 's/^/  /' || true
            cp "$OV/cap.err" "$OUT/overhead_${sc}_round$round.err"   # the whole summary (what a budget shed)
        fi
        echo "$round,$sc,$tps,$qps,$avg,$p95,$ccpu,$mcpu,$rss,$load,$mintps,$disk,$txs,$est,$((q1 - q0)),$(echo "scale=2; ($mu1 - $mu0) / $HZ" | bc),$(echo "scale=2; ($ms1 - $ms0) / $HZ" | bc),$su,$ss,$((x1 - x0)),$((i1 - i0)),$pr,$pn" >>"$CSV"
        log "round $round $sc: tps=$tps min_1s=$mintps p95=${p95}ms capture_cpu=${ccpu}s mariadbd_cpu=${mcpu}s rss=${rss}MB disk=${disk}MB load=$load"
    done
done

python3 - "$CSV" "$OUT/overhead_summary.md" "$SB_THREADS" "$SB_TIME" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
scen = list(dict.fromkeys(r["scenario"] for r in rows))
def med(sc, k):
    v = [float(r[k]) for r in rows if r["scenario"] == sc and r[k] not in ("-", "")]
    return statistics.median(v) if v else float("nan")
base_tps, base_p95 = med("none", "tps"), med("none", "lat_p95_ms")
# The server's CPU per statement it answered: unlike TPS, it hardly moves with other load on the
# machine, and it shows what a capture costs the server's own threads (on loopback the kernel
# copies each packet into a capturer's ring on the sending thread).
def per_statement(sc):
    v = [1e6 * float(r["mariadbd_cpu_s"]) / float(r["server_statements"]) for r in rows
         if r["scenario"] == sc and r["server_statements"] not in ("-", "", "0")]
    return statistics.median(v) if v else float("nan")
o = open(sys.argv[2], "w")
o.write(f"sysbench oltp_read_only, {sys.argv[3]} threads, {sys.argv[4]} s per run, unthrottled; medians over rounds\n\n")
o.write("| scenario | runs | TPS | p95 ms | TPS lost vs none | p95 vs none | worst 1 s TPS | capturer CPU s | mariadbd CPU s | mariadbd µs per statement | capturer peak RSS MB | disk MB |\n")
o.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
for sc in scen:
    n = sum(1 for r in rows if r["scenario"] == sc)
    tps, p95 = med(sc, "tps"), med(sc, "lat_p95_ms")
    o.write(f"| {sc} | {n} | {tps:.0f} | {p95:.2f} | {100 * (1 - tps / base_tps):.1f}% | {p95 / base_p95:.2f}x | "
            f"{med(sc, 'min_tps_1s'):.0f} | {med(sc, 'capture_cpu_s'):.1f} | {med(sc, 'mariadbd_cpu_s'):.1f} | "
            f"{per_statement(sc):.1f} | "
            f"{med(sc, 'capture_rss_mb'):.0f} | {med(sc, 'disk_mb'):.0f} |\n")
# Per statement the server answered, medians over rounds: where the server's and the client's CPU
# went (user/system), the machine's context switches, and the socket programs' ns per run.
def per(sc, k, scale):
    v = [scale * float(r[k]) / float(r["server_statements"]) for r in rows
         if r["scenario"] == sc and r.get(k) not in (None, "-", "") and r["server_statements"] not in ("-", "", "0")]
    return statistics.median(v) if v else float("nan")
def prog_ns(sc):
    v = [float(r["prog_ns"]) / float(r["prog_runs"]) for r in rows
         if r["scenario"] == sc and r.get("prog_runs") not in (None, "-", "", "0")]
    return f"{statistics.median(v):.1f} ({len(v)})" if v else "-"
o.write("\n| scenario | mariadbd user µs | mariadbd sys µs | sysbench user µs | sysbench sys µs | context switches | interrupts | socket program ns per packet (rounds) |\n")
o.write("|---|---:|---:|---:|---:|---:|---:|---:|\n")
for sc in scen:
    o.write(f"| {sc} | {per(sc, 'mariadbd_user_s', 1e6):.1f} | {per(sc, 'mariadbd_sys_s', 1e6):.1f} | {per(sc, 'sysbench_user_s', 1e6):.1f} | "
            f"{per(sc, 'sysbench_sys_s', 1e6):.1f} | {per(sc, 'ctxt', 1):.2f} | {per(sc, 'intr', 1):.2f} | {prog_ns(sc)} |\n")
o.close()
print(open(sys.argv[2]).read())
PY
log "done: $OUT/overhead_summary.md, $CSV"
