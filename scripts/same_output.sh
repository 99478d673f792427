#!/usr/bin/env bash
# Do two wirelog binaries write the same records? Runs both over every capture
# of ../shared/testdata (and the bench captures when present) with every log
# on (TSV and JSON) and a store, then compares the logs byte for byte (minus
# Zeek's #open/#close lines, which hold the wall clock) and a DuckDB dump of
# every store table (rows sorted, as Parquet file names hold the write time).
#
#   scripts/same_output.sh OLD_BINARY NEW_BINARY [CAPTURE...]
# Exit 0 when everything is identical; prints the first differences otherwise.
# RENAMES="mysql.num_rows=rows ..." compares the old side's store column
# `num_rows` of kind `mysql` as `rows` (a rename the new binary declares).
set -euo pipefail
old=$1 new=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
if (($#)); then
    caps=("$@")
else
    mapfile -t caps < <(find "$here/../shared/testdata" -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.gz' \) | sort)
    peers=${WIRELOG_PEERS_DIR:-$here/target/wirelog-peers}
    for p in http mysql mysql_text mixed; do
        [[ -f $peers/pcaps/$p.pcap ]] && caps+=("$peers/pcaps/$p.pcap")
    done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
differ=0
for cap in "${caps[@]}"; do
    id=$(printf '%s' "$cap" | md5sum | cut -c1-12)
    for side in old new; do
        bin=$old; [[ $side == new ]] && bin=$new
        for fmt in tsv json; do
            d=$work/$side/$id/$fmt
            mkdir -p "$d"
            # --seed: reproducible uids. --again: the store may refuse a capture it holds (each run has its own store anyway).
            extra=()
            "$bin" read --help | grep -q -- '--again' && extra+=(--again)
            "$bin" read -q --seed 1 "${extra[@]}" --logs "$d/logs" --log-format "$fmt" --store "$d/store" "$cap" \
                >"$d/stdout" 2>"$d/stderr" || echo "exit $?" >>"$d/stdout"
            find "$d/logs" -type f -exec sed -i -e '/^#open/d' -e '/^#close/d' {} +
        done
    done
    if ! diff -r "$work/old/$id" "$work/new/$id" -x store -x stderr >/dev/null; then
        echo "DIFFERENT logs: $cap"
        diff -r "$work/old/$id" "$work/new/$id" -x store -x stderr | head -20 || true
        differ=1
    fi
done
# Store tables, all captures at once.
python3 - "$work" "${RENAMES:-}" <<'PY' || differ=1
import duckdb, glob, os, sys
work = sys.argv[1]
renames = {}
for r in sys.argv[2].split():
    k, _, pair = r.partition(".")
    old, _, new = pair.partition("=")
    renames.setdefault(k, []).append((old, new))
bad = 0
for case in sorted(os.listdir(os.path.join(work, "old"))):
    for fmt in ("tsv",):
        o = os.path.join(work, "old", case, fmt, "store")
        n = os.path.join(work, "new", case, fmt, "store")
        kinds = sorted(set(os.listdir(o)) | set(os.listdir(n))) if os.path.isdir(o) else []
        for k in kinds:
            fo = glob.glob(os.path.join(o, k, "**", "*.parquet"), recursive=True)
            fn = glob.glob(os.path.join(n, k, "**", "*.parquet"), recursive=True)
            if not fo and not fn:
                continue
            if bool(fo) != bool(fn):
                print(f"DIFFERENT store {case} {k}: files only on one side"); bad = 1; continue
            q = "select * from read_parquet({}) order by all"
            old = "*"
            if k in renames:
                old = "* rename (" + ", ".join(f"{a} as {b}" for a, b in renames[k]) + ")"
            qo = f"select {old} from read_parquet({{}}) order by all"
            a = duckdb.sql(qo.format(fo)).fetchall()
            b = duckdb.sql(q.format(fn)).fetchall()
            ca = duckdb.sql(f"describe select {old} from read_parquet({fo})").fetchall()
            cb = duckdb.sql(f"describe select * from read_parquet({fn})").fetchall()
            if a != b or ca != cb:
                print(f"DIFFERENT store {case} {k}: {len(a)} vs {len(b)} rows"); bad = 1
sys.exit(bad)
PY
n=${#caps[@]}
if ((differ)); then echo "outputs differ ($n captures)"; exit 1; fi
echo "identical: $n captures, conn/flows/transaction logs in TSV and JSON, stdout, and every store table"
