#!/usr/bin/env python3
"""Times one SQL query with DuckDB (one thread) over a wirelog store's flows,
as the side-by-side reference for `wirelog query`.

usage: bench/duckdb_query.py STORE_DIR "SELECT ... FROM FLOWS ..."
FLOWS is replaced by read_parquet(STORE_DIR/flows/*/*/*.parquet).
Prints CPU and wall seconds, result rows and peak RSS.
"""
import resource
import sys
import time

import duckdb

store, sql = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute("SET threads=1")
src = f"read_parquet('{store}/flows/*/*/*.parquet')"
cpu, wall = time.process_time(), time.time()
rows = con.execute(sql.replace("FLOWS", src)).fetchall()
print(f"cpu {time.process_time() - cpu:.2f} s wall {time.time() - wall:.2f} s rows {len(rows)} "
      f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
