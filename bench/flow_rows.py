#!/usr/bin/env python3
"""Bytes per flow row in the store, and what `first`/`last` would cost at coarser precisions (issue 18).

Builds a store of synthetic flows shaped like real ones (5,000 hosts, Zipf-like hosts and ports,
heavy-tailed counters, 5-minute buckets, compacted to hourly files) with the store's own writer:

    target/release/examples/store_bench ROWS PER_BUCKET DIR

then reads its hourly Parquet files back with pyarrow and measures, per column, the compressed
bytes per row:

- as the store wrote them (its encodings, zstd);
- each column rewritten alone with pyarrow (zstd 3, the files' row groups, data pages v1), best of
  plain / dictionary / delta / byte-stream-split;
- `first` and `last` replaced, per precision (1 us, 1 ms, 10 ms, 100 ms, 1 s), by their offsets
  from the row's bucket start (`first`, `last`), or by `first`'s offset and `last - first`.

Each rewritten file is read back with pyarrow (the times come back within the precision, the other
columns equal, `bucket + offset` within the precision of `first`/`last` row by row) and with
DuckDB (top talkers, per-port sums and row counts equal the store's files').

    python3 bench/flow_rows.py [--rows 1440000] [--per-bucket 20000] [--dir /var/tmp/wirelog-flow-rows]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODINGS = ("PLAIN", "DICTIONARY", "DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT")
PRECISIONS = (("1 us", 1), ("1 ms", 1_000), ("10 ms", 10_000), ("100 ms", 100_000), ("1 s", 1_000_000))


def chunk_bytes(path):
    """Compressed bytes per column of a Parquet file (its column chunks: pages, no footer)."""
    md = pq.ParquetFile(path).metadata
    out = {}
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            out[col.path_in_schema] = out.get(col.path_in_schema, 0) + col.total_compressed_size
    return out


def best_encoding(arr, row_group, tmp):
    """The fewest compressed bytes of one column written alone, and the encoding that gave them."""
    best = None
    table = pa.table({"c": arr})
    for enc in ENCODINGS:
        if enc == "DELTA_BINARY_PACKED" and not pa.types.is_integer(arr.type) and not pa.types.is_timestamp(arr.type):
            continue
        if enc == "BYTE_STREAM_SPLIT" and not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
                                              or pa.types.is_fixed_size_binary(arr.type)):
            continue
        p = os.path.join(tmp, "col.parquet")
        kw = dict(compression="zstd", compression_level=3, row_group_size=row_group, data_page_version="1.0",
                  write_statistics=False)
        if enc == "DICTIONARY":
            kw["use_dictionary"] = True
        else:
            kw["use_dictionary"] = False
            if enc != "PLAIN":
                kw["column_encoding"] = {"c": enc}
        try:
            pq.write_table(table, p, **kw)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, OSError):
            continue
        n = chunk_bytes(p)["c"]
        if best is None or n < best[0]:
            best = (n, enc)
    return best


def as_int(arr):
    """Microseconds as int64 (timestamps or plain integers)."""
    return arr.cast(pa.int64()) if not pa.types.is_timestamp(arr.type) else arr.cast(pa.int64())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_440_000)
    ap.add_argument("--per-bucket", type=int, default=20_000)
    ap.add_argument("--dir", default="/var/tmp/wirelog-flow-rows")
    ap.add_argument("--bench", default=os.path.join(ROOT, "target/release/examples/store_bench"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    if not os.path.exists(a.bench):
        subprocess.run(["cargo", "build", "--release", "-p", "wirelog-store", "--example", "store_bench"],
                       cwd=ROOT, check=True)
    shutil.rmtree(a.dir, ignore_errors=True)
    env = dict(os.environ)
    r = subprocess.run([a.bench, str(a.rows), str(a.per_bucket), a.dir], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"store_bench failed: {r.stderr}")
    store_lines = [l for l in r.stdout.splitlines() if "bytes/row" in l or "B/row" in l]

    def as_first_last(t):
        """Files of the current form keep `first_offset_s` and `duration_s` (whole seconds, issue 18):
        the alternatives below are measured on `first`/`last` rebuilt from them as µs timestamps, so
        the finer precisions give the seconds back unchanged (their rows say what they would cost on
        data that still had them)."""
        if "first_offset_s" not in t.column_names:
            return t
        us = pa.scalar(1_000_000, pa.int64())
        b = t.column("bucket").combine_chunks().cast(pa.int64())
        fo = pc.multiply(t.column("first_offset_s").combine_chunks().cast(pa.int64()), us)
        du = pc.multiply(t.column("duration_s").combine_chunks().cast(pa.int64()), us)
        first = pc.add(b, fo)
        last = pc.add(first, du)
        ts = t.schema.field("bucket").type
        t = t.drop_columns(["first_offset_s", "duration_s"])
        return t.append_column("first", first.cast(ts)).append_column("last", last.cast(ts))

    files = sorted(f for f in glob.glob(os.path.join(a.dir, "**", "*.parquet"), recursive=True)
                   if "/flows" in f and not os.path.basename(f).startswith("."))
    if not files:
        sys.exit(f"{a.dir}: no flow files")
    rows = 0
    stored = {}
    tables = []
    for f in files:
        pf = pq.ParquetFile(f)
        rows += pf.metadata.num_rows
        for k, v in chunk_bytes(f).items():
            stored[k] = stored.get(k, 0) + v
        tables.append((f, as_first_last(pf.read()), pf.metadata.row_group(0).num_rows))
    file_bytes = sum(os.path.getsize(f) for f in files)
    print(f"store: {rows} flow rows in {len(files)} hourly files, {file_bytes / rows:.2f} bytes per row on disk "
          f"(footers included), {sum(stored.values()) / rows:.2f} in column chunks")
    for l in store_lines:
        print(f"  store_bench: {l.strip()}")

    tmp = tempfile.mkdtemp(prefix="wirelog-flow-rows-")
    try:
        cols = tables[0][1].column_names
        others = [c for c in cols if c not in ("first", "last")]

        def best_total(make):
            """Sum over files of the best encoding's bytes of the column `make(table)` gives."""
            total, encs = 0, set()
            for _, t, rg in tables:
                n, enc = best_encoding(make(t), rg, tmp)
                total += n
                encs.add(enc)
            return total, "/".join(sorted(encs))

        print("\n| column | as the store writes it (B/row) | rewritten, best encoding (B/row) | encoding |")
        print("|---|---:|---:|---|")
        other_best = 0
        for c in cols:
            n, enc = best_total(lambda t, c=c: t.column(c).combine_chunks())
            if c in others:
                other_best += n
            print(f"| {c} | {stored.get(c, 0) / rows:.2f} | {n / rows:.2f} | {enc} |")
        for c in ("first_offset_s", "duration_s"):
            if c in stored:
                print(f"| {c} (stored; first/last above are rebuilt from it) | {stored[c] / rows:.2f} | | |")
        other_stored = sum(v for k, v in stored.items() if k in others)
        print(f"| all but first/last | {other_stored / rows:.2f} | {other_best / rows:.2f} | |")

        print("\n| precision | first as offset from the bucket start | last as offset | last - first "
              "| first + (last - first) | row total, best of both (others as the store writes them) |")
        print("|---|---:|---:|---:|---:|---:|")
        results = []
        for name, us in PRECISIONS:
            def fields(t, us=us):
                b = as_int(t.column("bucket").combine_chunks())
                f = as_int(t.column("first").combine_chunks())
                l = as_int(t.column("last").combine_chunks())
                fo = pc.divide(pc.subtract(f, b), us)
                lo = pc.divide(pc.subtract(l, b), us)
                return fo, lo, pc.subtract(lo, fo)
            fo, _ = best_total(lambda t: fields(t)[0])
            lo, _ = best_total(lambda t: fields(t)[1])
            du, _ = best_total(lambda t: fields(t)[2])
            pair = min(fo + lo, fo + du)
            total = (other_stored + pair) / rows
            results.append((name, us))
            print(f"| {name} | {fo / rows:.2f} | {lo / rows:.2f} | {du / rows:.2f} | {(fo + du) / rows:.2f} "
                  f"| {total:.2f} |")
        print(f"\nrow total as the store writes it: "
              f"{sum(stored.values()) / rows:.2f} B/row in column chunks")

        # Read back: one rewritten file per precision (offset + duration), against the store's files.
        con = duckdb.connect()
        src = "[" + ",".join(f"'{f}'" for f in files) + "]"
        q_top = ("SELECT client, server, sum(bytes_out + bytes_in) AS b, sum(pkts_out + pkts_in) AS p, count(*) AS n "
                 "FROM read_parquet({src}) GROUP BY ALL ORDER BY b DESC, client, server LIMIT 20")
        q_port = ("SELECT server_port, proto, sum(bytes_out) AS b, sum(conns) AS c FROM read_parquet({src}) "
                  "GROUP BY ALL ORDER BY ALL")
        want_top = con.sql(q_top.format(src=src)).fetchall()
        want_port = con.sql(q_port.format(src=src)).fetchall()
        for name, us in results:
            outs = []
            for i, (_, t, rg) in enumerate(tables):
                b = as_int(t.column("bucket").combine_chunks())
                f = as_int(t.column("first").combine_chunks())
                l = as_int(t.column("last").combine_chunks())
                fo = pc.divide(pc.subtract(f, b), us)
                du = pc.subtract(pc.divide(pc.subtract(l, b), us), fo)
                nt = t.drop_columns(["first", "last"]).append_column("first_off", fo).append_column("duration", du)
                p = os.path.join(tmp, f"p{us}-{i}.parquet")
                pq.write_table(nt, p, compression="zstd", compression_level=3, row_group_size=rg)
                back = pq.read_table(p)
                assert back.drop_columns(["first_off", "duration"]).equals(t.drop_columns(["first", "last"])), name
                outs.append(p)
            dst = "[" + ",".join(f"'{p}'" for p in outs) + "]"
            assert con.sql(q_top.format(src=dst)).fetchall() == want_top, f"{name}: top talkers differ"
            assert con.sql(q_port.format(src=dst)).fetchall() == want_port, f"{name}: per-port sums differ"
            # Times back within the precision, row by row (pyarrow), and
            # their sums as DuckDB reads them.
            worst = [0, 0]
            for (_, t, _), p in zip(tables, outs):
                back = pq.read_table(p)
                b = as_int(back.column("bucket").combine_chunks())
                fo, du = back.column("first_off").combine_chunks(), back.column("duration").combine_chunks()
                first = pc.add(b, pc.multiply(fo, us))
                last = pc.add(b, pc.multiply(pc.add(fo, du), us))
                for k, (got, col) in enumerate(((first, "first"), (last, "last"))):
                    d = pc.max(pc.abs(pc.subtract(as_int(t.column(col).combine_chunks()), got))).as_py()
                    worst[k] = max(worst[k], d)
            assert worst[0] < us and worst[1] < us, f"{name}: times off by {worst} us"
            got_sum = con.sql(f"SELECT sum(epoch_us(bucket) + first_off * {us}) FROM read_parquet({dst})").fetchall()[0][0]
            stored_first = ('epoch_us(bucket) + first_offset_s * 1000000'
                            if "first_offset_s" in stored else 'epoch_us("first")')
            want_sum = con.sql(f'SELECT sum({stored_first}) FROM read_parquet({src})').fetchall()[0][0]
            assert 0 <= want_sum - got_sum < rows * us, f"{name}: DuckDB's first differs by {want_sum - got_sum}"
            print(f"read back at {name}: top talkers and per-port sums equal (DuckDB), other columns equal "
                  f"(pyarrow), first/last back within {worst[0]}/{worst[1]} us")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
