#!/usr/bin/env python3
"""Checks `wirelog clickhouse init --cluster NAME --print` (on stdin) in the real ClickHouse engine
(chdb), as far as one process without a cluster can, for wirelog's tests only:

1. every statement parses (`EXPLAIN AST`), ON CLUSTER, ReplicatedMergeTree and Distributed clauses
   included;
2. the statements run in a chdb session whose configuration defines the cluster NAME (one shard,
   127.0.0.1:9000, never contacted) and the {shard}/{replica} macros, with two changes that only a
   real cluster could do without: `ON CLUSTER` is dropped (it needs the distributed DDL queue in
   Keeper) and `ReplicatedMergeTree(path, replica)` becomes `MergeTree` (it needs Keeper; chdb has
   none; `ReplicatedSummingMergeTree(path, replica, cols)` becomes `SummingMergeTree(cols)`), its
   arguments checked instead: the path names {shard}, the database and the table, the
   replica is {replica}. The Distributed tables are created for real over the local ones.

Prints one JSON object (statements, parsed, tables: {name: engine}, distributed: {name: columns
equal to the local table's}); exits 1 naming the statement that failed.

Usage: cluster_ddl.py CLUSTER < statements
"""

import json
import os
import re
import shutil
import sys
import tempfile

from chdb import session


def main():
    cluster = sys.argv[1]
    text = sys.stdin.read()
    stmts = [s.strip().rstrip(";") for s in re.split(r";\s*\n", text) if s.strip()]
    tmp = tempfile.mkdtemp(prefix="wirelog-cluster-ddl-")
    try:
        cfg = os.path.join(tmp, "config.xml")
        with open(cfg, "w") as f:
            f.write("<clickhouse><remote_servers><%s><shard><replica><host>127.0.0.1</host><port>9000</port>"
                    "</replica></shard></%s></remote_servers><macros><shard>01</shard><replica>r1</replica>"
                    "</macros></clickhouse>" % (cluster, cluster))
        s = session.Session("file:%s?config-file=%s" % (os.path.join(tmp, "db"), cfg))
        parsed = 0
        for st in stmts:
            try:
                s.query("EXPLAIN AST " + st, "TSV")
                parsed += 1
            except Exception as e:
                sys.exit("does not parse: %s\n%s" % (st, e))
        on_cluster = " ON CLUSTER `%s`" % cluster
        for st in stmts:
            if st.startswith("CREATE") and on_cluster not in st:
                sys.exit("no ON CLUSTER: %s" % st)
            local = st.replace(on_cluster, "")
            m = re.search(r"Replicated(\w*)MergeTree\('([^']*)', '([^']*)'(, [^)]*)?\)", local)
            if m:
                name = re.search(r"CREATE TABLE IF NOT EXISTS `?(\w+)`?\.`?(\w+)`?", local)
                family, path, replica, params = m.group(1), m.group(2), m.group(3), m.group(4)
                if "{shard}" not in path or not path.endswith("/%s/%s" % name.groups()) or replica != "{replica}":
                    sys.exit("replication path or replica: %s" % st)
                # SummingMergeTree keeps its columns: (handshakes).
                local = local.replace(m.group(0), "%sMergeTree%s" % (family, "(%s)" % params[2:] if params else ""))
            if local.startswith("INSERT"):
                continue  # into a Distributed table: it would queue for 127.0.0.1:9000
            try:
                s.query(local, "TSV")
            except Exception as e:
                sys.exit("cannot run: %s\n%s" % (local, e))
        db = re.search(r"CREATE DATABASE IF NOT EXISTS `?(\w+)`?", text).group(1)
        rows = s.query("SELECT name, engine FROM system.tables WHERE database = '%s' ORDER BY name" % db,
                       "TSV").bytes().decode().split("\n")
        tables = dict(r.split("\t") for r in rows if r)
        same = {}
        for name, engine in tables.items():
            if engine == "Distributed":
                cols = lambda t: s.query("SELECT name, type FROM system.columns WHERE database = '%s' AND "
                                         "table = '%s' ORDER BY position" % (db, t), "TSV").bytes()
                same[name] = cols(name) == cols(name + "_local") and len(cols(name)) > 0
        print(json.dumps({"statements": len(stmts), "parsed": parsed, "tables": tables, "distributed": same}))
        s.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
