#!/usr/bin/env python3
"""Writes wirelog's CT log list (the data `--zeek-policy validate-sct`
checks SCTs against) from Zeek's CT log list script.

Usage: gen_ct_logs.py [--from TEXT] CT-LIST.zeek [MORE.zeek ...] > ct-logs.tsv

`--from` names where the scripts came from (a repository and commit), for
the output's comment.

Input: Zeek's `scripts/base/protocols/ssl/ct-list.zeek` (or any script
whose `SSL::ct_logs` entries have the same form: one per line, the log id
as the table index and `CTInfo($description=..., $operator=..., $key=...)`).
Zeek generates that script from Google's log list
(https://www.gstatic.com/ct/log_list/v3/log_list.json); only its data is
taken here. Later files add to or replace entries of earlier ones, as
Zeek's `redef SSL::ct_logs += {...}` does.

Output, one log per line, tab-separated: the log id (32 bytes) and the
log's public key (a DER SubjectPublicKeyInfo), both in standard base64,
then the operator and the description; `#` lines are comments (the first
ones say where the list came from). Tabs or newlines in a text field are
refused. See crates/sink/src/logs/sct.rs for the reader.
"""

import base64
import re
import sys

ENTRY = re.compile(r'^\s*\["((?:[^"\\]|\\.)*)"\]\s*=\s*(?:SSL::)?CTInfo\((.*)\),?\s*$')
FIELD = re.compile(r'\$(\w+)=(?:"((?:[^"\\]|\\.)*)"|(\d+))')


def unescape(s):
    """A Zeek string literal's bytes (\\xNN, \\\\, \\" and the C escapes)."""
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "0": 0}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        n = s[i + 1]
        if n == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif n in simple:
            out.append(simple[n])
            i += 2
        else:
            raise ValueError(f"unknown escape \\{n}")
    return bytes(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    args = sys.argv[1:]
    heads = []
    if args[:1] == ["--from"] and len(args) > 2:
        heads.append(f"# from {args[1]}")
        args = args[2:]
    logs = {}
    for path in args:
        text = open(path, encoding="utf-8").read()
        heads.append(f"# from {path}:")
        for line in text.splitlines():
            if line.startswith("# File generated") or line.startswith("# Source file"):
                heads.append("#   " + line[2:])
        for n, line in enumerate(text.splitlines(), 1):
            m = ENTRY.match(line)
            if not m:
                if "CTInfo(" in line:
                    sys.exit(f"{path}:{n}: a CTInfo entry this script does not read")
                continue
            logid = unescape(m.group(1))
            fields = {k: unescape(v) if v is not None else d for k, v, d in FIELD.findall(m.group(2))}
            if len(logid) != 32 or not all(k in fields for k in ("key", "operator", "description")):
                sys.exit(f"{path}:{n}: an entry without a 32-byte id, key, operator and description")
            op, desc = fields["operator"].decode("utf-8"), fields["description"].decode("utf-8")
            if any(c in t for t in (op, desc) for c in "\t\n"):
                sys.exit(f"{path}:{n}: a tab or newline in the operator or description")
            logs[logid] = (fields["key"], op, desc)
    print("# CT logs for wirelog's --zeek-policy validate-sct (written by scripts/gen_ct_logs.py).")
    for h in heads:
        print(h)
    print("# log id (base64)\tkey (base64 DER SubjectPublicKeyInfo)\toperator\tdescription")
    for logid, (key, op, desc) in logs.items():
        print(f"{base64.b64encode(logid).decode()}\t{base64.b64encode(key).decode()}\t{op}\t{desc}")


if __name__ == "__main__":
    main()
