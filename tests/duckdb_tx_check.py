#!/usr/bin/env python3
"""Reads the transaction tables of a wirelog store with DuckDB and prints what
it found as JSON, for tests/store_duckdb.rs to compare with Rust's totals.

usage: duckdb_tx_check.py <data-dir>
"""
import json
import sys

import duckdb

d = sys.argv[1]
con = duckdb.connect()


def src(kind):
    return f"read_parquet('{d}/{kind}/*/*/*.parquet', hive_partitioning=true)"


def one(sql):
    row = con.execute(sql).fetchone()
    return [int(x) if x is not None and not isinstance(x, str) else x for x in row]


def types(s):
    return {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {s}").fetchall()}


own = {
    "http": "coalesce(sum(status_code), 0), count(*) FILTER (WHERE status_code >= 500), count(user_agent)",
    "mysql": "coalesce(sum(error_code), 0), count(DISTINCT fingerprint), coalesce(sum(affected_rows), 0)",
    "pgsql": "coalesce(sum(\"rows\"), 0), count(DISTINCT fingerprint), count(error_code)",
    "redis": "count(*) FILTER (WHERE command = 'GET'), count(reply), count(DISTINCT args)",
    "dns": "count(*) FILTER (WHERE aa), coalesce(sum(qtype), 0), count(*) FILTER (WHERE rcode_name = 'NXDOMAIN')",
    "tls": "count(*) FILTER (WHERE established), coalesce(sum(not_valid_after), 0), count(DISTINCT ja4)",
    "memcached": "count(*) FILTER (WHERE command = 'get'), coalesce(sum(value_bytes), 0), count(DISTINCT \"key\")",
    "mongodb": "coalesce(sum(docs_returned), 0), count(DISTINCT fingerprint), count(*) FILTER (WHERE more_to_come)",
    "mqtt": "coalesce(sum(payload_bytes), 0), count(DISTINCT topic), count(*) FILTER (WHERE retain)",
    "amqp": "coalesce(sum(body_bytes), 0), count(DISTINCT exchange), count(*) FILTER (WHERE from_server)",
    "kafka": "coalesce(sum(records), 0), count(DISTINCT topic), coalesce(sum(throttle_ms), 0)",
    "grpc": "coalesce(sum(grpc_status), 0), count(DISTINCT method), count(*) FILTER (WHERE trailers_only)",
    "cassandra": "coalesce(sum(\"rows\"), 0), count(DISTINCT fingerprint), coalesce(sum(error_code), 0)",
}
out = {}
for kind, extra in own.items():
    s = src(kind)
    c, rq, rs, ln, ls, fb, err, mn, mx, parts, uids, e1, e2, e3 = one(
        f"""SELECT count(*), sum(request_bytes), sum(response_bytes), count(latency), sum(latency),
                   sum(first_byte_latency), count(*) FILTER (WHERE status = 'error'),
                   epoch_us(min(ts)), epoch_us(max(ts)), count(DISTINCT (date, hour)),
                   count(DISTINCT uid), {extra} FROM {s}"""
    )
    out[kind] = {
        "count": c, "sum_request_bytes": rq, "sum_response_bytes": rs, "latency_count": ln,
        "latency_sum_us": ls, "first_byte_latency_sum_us": fb, "errors": err, "min_ts_us": mn,
        "max_ts_us": mx, "partitions": parts, "uids": uids, "own1": e1, "own2": e2, "own3": e3,
        "types": types(s),
    }
print(json.dumps(out))
