#!/usr/bin/env bash
# Runs every fuzz target for a given time each (default 600 s), one after the
# other, and prints a summary line per target. Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz`). Findings land in fuzz/artifacts/.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}; shift || true
targets=("$@")
((${#targets[@]})) || targets=(capture_reader decode_packet track_packets parse_http parse_http2 parse_hpack parse_dns parse_db parse_tls parse_x509 reassembly parse_mongodb parse_mqtt parse_amqp parse_kafka parse_cassandra parse_memcached)
mkdir -p corpus logs
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    # Seed with real captures so the fuzzer starts from valid structure.
    if [[ $t == capture_reader && -z $(ls -A "corpus/$t") ]]; then
        find ../../shared/testdata -name '*.pcap' -size -20k -exec cp {} "corpus/$t/" \; 2>/dev/null || true
        find ../../shared/testdata -name '*.pcapng' -size -30k -exec cp {} "corpus/$t/" \; 2>/dev/null || true
    fi
    # The HPACK decoder starts from every header block of the vectors.
    if [[ $t == parse_hpack && -z $(ls -A "corpus/$t") ]]; then
        python3 - "corpus/$t" <<'PY'
import glob, json, sys
n = 0
for f in glob.glob("../../shared/testdata/hpack/*/story_*.json"):
    for c in json.load(open(f)).get("cases", []):
        if "wire" in c:
            open(f"{sys.argv[1]}/{n}", "wb").write(bytes([n & 1]) + bytes.fromhex(c["wire"]))
            n += 1
PY
    fi
    start=$(date +%s)
    rc=0
    cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 \
        >"logs/$t.log" 2>&1 || rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -oE 'cov: [0-9]+' "logs/$t.log" | tail -1 | grep -oE '[0-9]+' || echo "?")
    printf '%s: %s s, %s runs, coverage %s edges, exit %s%s\n' "$t" "$(( $(date +%s) - start ))" "$runs" "$cov" "$rc" \
        "$([[ $rc -ne 0 ]] && echo " (see fuzz/logs/$t.log and fuzz/artifacts/$t/)")"
done
