#!/usr/bin/env python3
"""Reads one store file of each kind with every Parquet reader installed
(pyarrow, pandas, DuckDB, ClickHouse through chdb) and compares every value
of every column with what wirelog's own reader gave (written by
tests/store_readers.rs as JSON). Prints a JSON report: per kind, the readers
that read it and the values that differ (none when all agree).

usage: store_readers.py <ours.json>
"""
import datetime
import json
import sys

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def canon(v):
    """A value as JSON holds it: times as epoch microseconds, bytes as hex."""
    if v is None:
        return None
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
        if isinstance(v, pd.Timestamp):
            return v.value // 1000
    except ImportError:
        pass
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return (v - EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if hasattr(v, "item") and not isinstance(v, (str, int)):  # numpy scalars
        return canon(v.item())
    return v


def read_pyarrow(f):
    import pyarrow.parquet as pq

    t = pq.read_table(f)
    return {n: t.column(n).to_pylist() for n in t.column_names}, t.schema


def read_pandas(f):
    import pandas as pd

    # Arrow-backed columns: unsigned 64-bit counts and nulls kept exact
    # (NumPy's would turn a nullable count into a float).
    df = pd.read_parquet(f, dtype_backend="pyarrow")
    return {n: df[n].tolist() for n in df.columns}


def read_duckdb(f):
    import duckdb

    con = duckdb.connect()
    cur = con.execute(f"SELECT * FROM read_parquet('{f}')")
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def read_chdb(f):
    import chdb

    t = chdb.query(f"SELECT * FROM file('{f}', Parquet)", "ArrowTable")
    return {n: t.column(n).to_pylist() for n in t.column_names}


def main():
    ours = json.load(open(sys.argv[1]))
    report = {}
    for kind, k in ours.items():
        f = k["file"]
        text_cols = set(k["text"])
        base, schema = read_pyarrow(f)
        names = list(base.keys())
        want = {n: [canon(x) for x in base[n]] for n in names}
        r = {"rows": len(want[names[0]]) if names else 0, "readers": ["pyarrow"], "mismatches": [], "missing": []}
        for name, reader in (("pandas", read_pandas), ("duckdb", read_duckdb), ("chdb", read_chdb)):
            try:
                got = reader(f)
            except ImportError as e:
                r["missing"].append(f"{name}: {e}")
                continue
            r["readers"].append(name)
            for n in names:
                if n not in got:
                    r["mismatches"].append(f"{name}: no column {n}")
                    continue
                vals = [canon(x) for x in got[n]]
                if n in text_cols:
                    # ClickHouse gives its String as bytes (the file's UTF-8).
                    vals = [bytes.fromhex(x).decode() if isinstance(x, str) and isinstance(got[n][i], (bytes, bytearray)) else x
                            for i, x in enumerate(vals)]
                if vals != want[n]:
                    i = next((i for i, (a, b) in enumerate(zip(vals, want[n])) if a != b), min(len(vals), len(want[n])))
                    r["mismatches"].append(
                        f"{name}: {n} row {i}: {vals[i] if i < len(vals) else 'none'!r} vs pyarrow's "
                        f"{want[n][i] if i < len(want[n]) else 'none'!r} ({len(vals)} vs {len(want[n])} values)")
        # wirelog's own reader (tests/store_readers.rs): an unset text reads "".
        r["readers"].append("wirelog")
        for n, vals in k["columns"].items():
            if n not in want:
                r["mismatches"].append(f"wirelog: {n} is not in the file ({names})")
                continue
            w = want[n]
            if n in text_cols:
                w = ["" if x is None else x for x in w]
            if vals != w:
                i = next((i for i, (a, b) in enumerate(zip(vals, w)) if a != b), min(len(vals), len(w)))
                r["mismatches"].append(
                    f"wirelog: {n} row {i}: {vals[i] if i < len(vals) else 'none'!r} vs pyarrow's "
                    f"{w[i] if i < len(w) else 'none'!r} ({len(vals)} vs {len(w)} values)")
        r["compared"] = sorted(k["columns"].keys())
        r["file_columns"] = names
        report[kind] = r
    print(json.dumps(report))


if __name__ == "__main__":
    main()
