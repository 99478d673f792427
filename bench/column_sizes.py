#!/usr/bin/env python3
"""Per column of the store's Parquet files: encodings, codec, bytes before and
after compression (from the footers, summed over files and row groups), and
what compression saved. Used to choose each column's encoding and codec
(BENCHMARKS.md, "Columnar writer (issue 36)").

usage: bench/column_sizes.py FILE_OR_DIR...   (needs pyarrow)
"""
import glob
import os
import sys

import pyarrow.parquet as pq

files = []
for a in sys.argv[1:]:
    files += sorted(glob.glob(f"{a}/**/*.parquet", recursive=True)) if os.path.isdir(a) else [a]
by_kind = {}
for f in files:
    md = pq.ParquetFile(f).metadata
    kind = (md.metadata or {}).get(b"wirelog.kind", b"?").decode()
    cols = by_kind.setdefault(kind, {})
    by_kind.setdefault(kind + "#rows", [0])[0] += md.num_rows
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            cc = rg.column(c)
            e = cols.setdefault(cc.path_in_schema, [set(), set(), 0, 0])
            e[0].update(cc.encodings)
            e[1].add(cc.compression)
            e[2] += cc.total_uncompressed_size
            e[3] += cc.total_compressed_size
for kind, cols in by_kind.items():
    if kind.endswith("#rows"):
        continue
    rows = by_kind[kind + "#rows"][0]
    tu = sum(e[2] for e in cols.values())
    tc = sum(e[3] for e in cols.values())
    print(f"## {kind}: {rows} rows, {tu} bytes uncompressed, {tc} compressed ({tc / max(rows, 1):.2f} B/row)")
    print("| column | encodings | codec | uncompressed | compressed | saved |")
    print("|---|---|---|---:|---:|---:|")
    for name, (encs, codecs, u, c) in cols.items():
        saved = 1 - c / u if u else 0
        print(f"| {name} | {','.join(sorted(encs))} | {','.join(sorted(codecs))} | {u} | {c} | {saved:.0%} |")
