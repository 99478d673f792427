#!/usr/bin/env python3
"""Reads a wirelog store with DuckDB (and pyarrow when installed) and prints
what it found as JSON, for tests/store_duckdb.rs to compare with Rust's totals.

usage: duckdb_check.py <data-dir>
"""
import json
import sys

import duckdb

d = sys.argv[1]
con = duckdb.connect()
flows = f"read_parquet('{d}/flows/*/*/*.parquet', hive_partitioning=true)"
conns = f"read_parquet('{d}/conns/*/*/*.parquet', hive_partitioning=true)"


def one(sql):
    row = con.execute(sql).fetchone()
    return [int(x) if x is not None and not isinstance(x, str) else x for x in row]


def types(src):
    return {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}


out = {}
c, bo, pi, bi, po, cn, mn, mx, hours = one(
    f"""SELECT count(*), sum(bytes_out), sum(pkts_in), sum(bytes_in), sum(pkts_out), sum(conns),
               epoch_us(min(bucket)), epoch_us(max(bucket + to_seconds(first_offset_s + duration_s))),
               count(DISTINCT (date, hour)) FROM {flows}"""
)
v4 = con.execute(
    f"SELECT hex(client) FROM {flows} WHERE client[1:10] = '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'::BLOB ORDER BY client LIMIT 1"
).fetchone()
out["flows"] = {
    "count": c, "sum_bytes_out": bo, "sum_pkts_in": pi, "sum_bytes_in": bi, "sum_pkts_out": po,
    "sum_conns": cn, "min_bucket_us": mn, "max_last_us": mx, "partitions": hours,
    "first_v4_client_hex": v4[0] if v4 else None,
    "udp_rows": one(f"SELECT count(*) FROM {flows} WHERE proto = 17")[0],
    "port_443_bytes": one(f"SELECT coalesce(sum(bytes_out), 0) FROM {flows} WHERE server_port = 443")[0],
}
c, oib, rib, op, ob, dur_n, dur_sum, mn, dns, vlan_n, partitions = one(
    f"""SELECT count(*), sum(orig_ip_bytes), sum(resp_ip_bytes), sum(orig_pkts), sum(orig_bytes),
               count(duration), sum(duration), epoch_us(min(ts)), count(*) FILTER (WHERE service = 'dns'),
               count(vlan), count(DISTINCT (date, hour)) FROM {conns}"""
)
out["conns"] = {
    "count": c, "sum_orig_ip_bytes": oib, "sum_resp_ip_bytes": rib, "sum_orig_pkts": op,
    "sum_orig_bytes": ob, "duration_count": dur_n, "duration_sum_us": dur_sum, "min_ts_us": mn,
    "dns": dns, "vlan_count": vlan_n, "partitions": partitions,
    "sf_count": one(f"SELECT count(*) FROM {conns} WHERE conn_state = 'SF'")[0],
    "local_orig_count": one(f"SELECT count(*) FROM {conns} WHERE local_orig")[0],
}
out["types"] = {"flows": types(flows), "conns": types(conns)}

try:
    import glob

    import pyarrow.parquet as pq

    files = sorted(glob.glob(f"{d}/flows/*/*/*.parquet"))
    t = pq.read_table(files[0])
    out["pyarrow"] = {
        "rows": t.num_rows,
        "duckdb_rows": one(f"SELECT count(*) FROM read_parquet('{files[0]}')")[0],
        "bucket_type": str(t.schema.field("bucket").type),
        "bytes_out_type": str(t.schema.field("bytes_out").type),
    }
    try:
        df = t.to_pandas()
        out["pandas_rows"] = len(df)
    except ImportError:
        out["pandas_rows"] = None
except ImportError:
    out["pyarrow"] = None

# ClickHouse's own Parquet reader, through chdb (embedded ClickHouse) when installed.
try:
    import chdb

    def ch(sql):
        return chdb.query(sql, "JSONCompact").bytes()

    fl = f"file('{d}/flows/*/*/*.parquet', Parquet)"
    co = f"file('{d}/conns/*/*/*.parquet', Parquet)"
    r = json.loads(ch(
        f"""SELECT count(), sum(bytes_out), sum(pkts_in), toTypeName(any(bucket)), toTypeName(any(server_port)),
                   toTypeName(any(client)) FROM {fl}"""
    ))["data"][0]
    r2 = json.loads(ch(
        f"""SELECT count(), sum(orig_ip_bytes), sum(orig_bytes), toTypeName(any(orig_bytes)), toTypeName(any(ts)),
                   countIf(service = 'dns') FROM {co}"""
    ))["data"][0]
    out["clickhouse"] = {
        "flows_count": int(r[0]), "flows_sum_bytes_out": int(r[1]), "flows_sum_pkts_in": int(r[2]),
        "bucket_type": r[3], "server_port_type": r[4], "client_type": r[5],
        "conns_count": int(r2[0]), "conns_sum_orig_ip_bytes": int(r2[1]), "conns_sum_orig_bytes": int(r2[2]),
        "orig_bytes_type": r2[3], "ts_type": r2[4], "dns": int(r2[5]),
    }
except ImportError:
    out["clickhouse"] = None

print(json.dumps(out))
