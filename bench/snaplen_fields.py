#!/usr/bin/env python3
"""Compares a transaction log written from a whole capture with one written from the same capture
cut to a snap length (`editcap -s N`), field by field (issue 36).

usage: bench/snaplen_fields.py WHOLE.log CUT.log
Statements are matched by (ts, id.orig_h, id.orig_p, id.resp_h, id.resp_p): a `read` seeds its
uids from the capture's content, so the two logs name connections differently; `uid` is compared
through the mapping the first statement of each connection makes (another uid for a later statement
of the same connection counts as a difference). For each field it prints how many of the whole capture's
statements have another value in the cut one, split into "unset" (the cut log says `-` or
(empty)) and "other" (a different value), and how many statements are missing or extra.
"""
import sys
from collections import Counter


def rows(path):
    fields, out = None, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#fields\t"):
                fields = line.split("\t")[1:]
            elif line and not line.startswith("#"):
                r = dict(zip(fields, line.split("\t")))
                out[(r["ts"], r["id.orig_h"], r["id.orig_p"], r["id.resp_h"], r["id.resp_p"])] = r
    return fields, out


def main():
    fields, whole = rows(sys.argv[1])
    _, cut = rows(sys.argv[2])
    missing = [k for k in whole if k not in cut]
    extra = [k for k in cut if k not in whole]
    unset, other = Counter(), Counter()
    examples = {}
    uids = {}
    for k, w in whole.items():
        c = cut.get(k)
        if c is None:
            continue
        for f in fields:
            if f == "uid":
                same = uids.setdefault(w["uid"], c["uid"]) == c["uid"]
            else:
                same = w.get(f) == c.get(f)
            if not same:
                if c.get(f) in ("-", "(empty)"):
                    unset[f] += 1
                else:
                    other[f] += 1
                    examples.setdefault(f, (w.get(f), c.get(f)))
    print(f"statements: whole {len(whole)}, cut {len(cut)}, missing {len(missing)}, extra {len(extra)}")
    if len(set(uids.values())) != len(uids):
        print(f"uids: {len(uids)} connections of the whole capture map to {len(set(uids.values()))} of the cut one")
    print("| field | differ: unset in the cut log | differ: another value |")
    print("|---|---:|---:|")
    for f in fields:
        if unset[f] or other[f]:
            print(f"| {f} | {unset[f]} | {other[f]} |")
    for f, (w, c) in examples.items():
        print(f"example {f}: whole {w[:80]!r} cut {c[:80]!r}")


if __name__ == "__main__":
    main()
