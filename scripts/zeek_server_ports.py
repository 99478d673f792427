#!/usr/bin/env python3
"""Generates crates/track/src/zeek_ports.rs: Zeek's `likely_server_ports` as
its default scripts build it, each port with the script and line that put it
there.

Usage: scripts/zeek_server_ports.py ZEEK_GIT_DIR [REV] > crates/track/src/zeek_ports.rs

ZEEK_GIT_DIR is a clone of github.com/zeek/zeek (bare or not; files are read
with `git show REV:path`, REV defaulting to HEAD).

What it follows, read in Zeek's source (file, function):
  - src/zeek-setup.cc (setup): `zeek -r` loads base/init-bare.zeek,
    builtin-plugins/__preload__.zeek, base/init-frameworks-and-bifs.zeek, then
    (not bare mode) base/init-default.zeek, then builtin-plugins/__load__.zeek.
    The builtin-plugins files are generated at Zeek's build time for plugins
    compiled in; a stock build has none with port registrations.
  - @load resolution (src/util.cc, find_script_file / normalize_path): a path
    relative to the loading script when it starts with `.`, else to
    ZEEKPATH's scripts/ (base/..., policy/...); a directory loads its
    __load__.zeek; `.zeek` is appended when missing.
  - scripts/base/frameworks/analyzer/main.zeek, register_for_ports, and
    scripts/base/packet-protocols/main.zeek, register_for_ports: the
    `server_ports` argument is added to likely_server_ports; the
    non-server ports are not. register_for_port (singular) adds nothing.
  - `redef likely_server_ports += { ... }` anywhere in a loaded script.
A set argument is a set literal or a constant/option of the script's
module (`const ports = { 21/tcp, 2811/tcp } &redef;`), extended by any
`redef Module::name += { ... }` in a loaded script. Every `@if` met on the way
must be in CONDITIONS below (its value in a standalone `zeek -r`), else the
script stops with an error: nothing is guessed.
"""

import re
import subprocess
import sys

# Preprocessor conditions met on the way, with their value in a standalone
# `zeek -r trace.pcap` of a stock build (Spicy compiled in, no cluster).
CONDITIONS = {
    "have_spicy()": True,
    "have_spicy_analyzers()": True,
    "Cluster::is_enabled()": False,
    "! Cluster::is_enabled()": True,
    "Cluster::local_node_type() == Cluster::MANAGER": False,
    "Cluster::local_node_type() != Cluster::MANAGER": True,
}

# Names tested by @ifdef on the way, defined or not in a stock build (the
# QUIC analyzer is a Spicy analyzer, built with Spicy).
DEFINED = {
    "Analyzer::ANALYZER_QUIC": True,
    "Notice::ACTION_ADD_GEODATA": True,
}

ROOTS = [
    "scripts/base/init-bare.zeek",
    "scripts/base/init-frameworks-and-bifs.zeek",
    "scripts/base/init-default.zeek",
]

FRAMEWORK_DEFS = {
    "scripts/base/frameworks/analyzer/main.zeek",
    "scripts/base/packet-protocols/main.zeek",
}


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


class Tree:
    def __init__(self, gitdir, rev):
        self.gitdir, self.rev = gitdir, rev
        self.files = set(git(gitdir, "ls-tree", "-r", "--name-only", rev, "scripts").split("\n"))
        self.commit = git(gitdir, "rev-parse", rev).strip()

    def read(self, path):
        return git(self.gitdir, "show", f"{self.rev}:{path}")

    def resolve(self, frm, target):
        target = target.strip()
        if target.startswith("."):
            base = frm.rsplit("/", 1)[0] + "/" + target
        else:
            base = "scripts/" + target
        parts = []
        for p in base.split("/"):
            if p == "." or p == "":
                continue
            if p == "..":
                parts.pop()
            else:
                parts.append(p)
        base = "/".join(parts)
        for cand in (base, base + ".zeek", base + "/__load__.zeek"):
            if cand in self.files and not cand.endswith("/"):
                return cand
        return None


def strip_comment(line):
    # Zeek comments start with '#' outside strings; port lists hold no strings.
    out, in_str = [], False
    for ch in line:
        if ch == '"':
            in_str = not in_str
        if ch == "#" and not in_str:
            break
        out.append(ch)
    return "".join(out)


def load_all(tree):
    """Loaded scripts in load order (each once, as Zeek loads each once), and
    per script the lines under a false @if (left out) or an undecided one."""
    order, seen, inactive = [], set(), {}

    def visit(path):
        if path in seen:
            return
        seen.add(path)
        order.append(path)
        stack = []  # per open @if: True, False, or None (undecided)
        off = inactive.setdefault(path, {})
        for n, raw in enumerate(tree.read(path).split("\n"), 1):
            line = raw.strip()
            if re.match(r"@(if|ifdef|ifndef)\b", line):
                m = re.match(r"@(if|ifdef|ifndef)\s*\((.*)\)\s*(#.*)?$", line)
                if not m:
                    stack.append(None)
                elif m.group(1) == "if":
                    stack.append(CONDITIONS.get(m.group(2).strip()))
                else:
                    d = DEFINED.get(m.group(2).strip())
                    stack.append(None if d is None else d == (m.group(1) == "ifdef"))
                continue
            if line.startswith("@else"):
                if stack and stack[-1] is not None:
                    stack[-1] = not stack[-1]
                continue
            if line.startswith("@endif"):
                stack.pop()
                continue
            if False in stack:
                off[n] = False
                continue
            if None in stack:
                off[n] = None
            m = re.match(r"@load\s+(\S+)", line)
            if not m:
                continue
            if None in stack:
                sys.exit(f"{path}:{n}: @load under a condition not in CONDITIONS: add its value")
            target = tree.resolve(path, m.group(1))
            if target is None:
                # bif-generated scripts and builtin-plugins/* exist only in a build.
                # Scripts configured at build time from a `.zeek.in` template
                # (base/misc/installation: install paths) are read as the template.
                if "bif" in m.group(1) or m.group(1).startswith("builtin-plugins"):
                    continue
                tmpl = tree.resolve(path, m.group(1) + ".zeek.in")
                if tmpl is not None:
                    visit(tmpl)
                    continue
                sys.exit(f"{path}:{n}: cannot resolve @load {m.group(1)}")
            visit(target)

    for r in ROOTS:
        visit(r)
    return order, inactive


PORT = re.compile(r"\b(\d+)/(tcp|udp)\b")


def main():
    gitdir = sys.argv[1]
    rev = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    tree = Tree(gitdir, rev)
    loaded, inactive = load_all(tree)

    # Set constants and their redefs: full name -> [(port, proto, script, line)].
    sets = {}
    calls = []  # (script, line, analyzer tag, server-ports expression, module)
    direct = []  # redef likely_server_ports += {...}
    for path in loaded:
        text = tree.read(path).split("\n")
        module = "GLOBAL"
        i = 0
        while i < len(text):
            line = strip_comment(text[i])
            n = i + 1
            state = inactive[path].get(n, True)
            if state is False:
                i += 1
                continue
            if state is None and ("register_for_ports" in line or "likely_server_ports" in line):
                sys.exit(f"{path}:{n}: a registration under a condition not in CONDITIONS: add its value")
            m = re.match(r"\s*module\s+([A-Za-z_][\w:]*)\s*;", line)
            if m:
                module = m.group(1)
            # A definition or redef of a set, possibly over several lines.
            m = re.match(r"\s*(?:const|option|redef)\s+([A-Za-z_][\w:]*)\s*(?::\s*set\[port\]\s*)?(\+?=)\s*(.*)$", line)
            if m and "{" in m.group(3):
                name, op, rest = m.group(1), m.group(2), m.group(3)
                body, j = [(n, rest)], i
                while "}" not in strip_comment(text[j]) and j + 1 < len(text):
                    j += 1
                    body.append((j + 1, strip_comment(text[j])))
                full = name if "::" in name else f"{module}::{name}"
                if name == "likely_server_ports":
                    for ln, b in body:
                        for pm in PORT.finditer(b):
                            direct.append((int(pm.group(1)), pm.group(2), path, ln, "redef likely_server_ports"))
                else:
                    ports = [(int(pm.group(1)), pm.group(2), path, ln) for ln, b in body for pm in PORT.finditer(b)]
                    if ports or op == "=":
                        if op == "=" and not line.lstrip().startswith("redef"):
                            sets[full] = ports
                        elif op == "=":
                            sets[full] = ports  # a redef replacing the set
                        else:
                            sets.setdefault(full, []).extend(ports)
                i = j + 1
                continue
            if path not in FRAMEWORK_DEFS:
                m = re.search(r"\b(Analyzer|PacketAnalyzer)::register_for_ports\s*\((.*)\)\s*;", line)
                if m:
                    args = [a.strip() for a in split_args(m.group(2))]
                    if m.group(1) == "Analyzer":
                        tag, server = args[0], args[1]
                    else:
                        tag, server = args[1], args[2]
                    calls.append((path, n, tag, server, module))
            i += 1

    entries = []
    for path, n, tag, server, module in calls:
        if server.startswith("set(") or server.startswith("{"):
            for pm in PORT.finditer(server):
                entries.append((int(pm.group(1)), pm.group(2), path, n, path, n, tag))
            continue
        full = server if "::" in server else f"{module}::{server}"
        if full not in sets:
            sys.exit(f"{path}:{n}: register_for_ports with {server}: no set of that name in the loaded scripts")
        for port, proto, dpath, dline in sets[full]:
            entries.append((port, proto, dpath, dline, path, n, tag))
    for port, proto, path, n, tag in direct:
        entries.append((port, proto, path, n, path, n, tag))

    entries.sort(key=lambda e: (e[1], e[0], e[2], e[3]))
    print("// @generated by scripts/zeek_server_ports.py from zeek/zeek")
    print(f"// commit {tree.commit}; do not edit: run the script again.")
    print("//")
    print("// Zeek's `likely_server_ports` as the scripts `zeek -r` loads by default")
    print("// leave it: every `server_ports` argument of Analyzer::register_for_ports")
    print("// and PacketAnalyzer::register_for_ports in a loaded script (see the")
    print("// script's own comment for how it follows Zeek's loading).")
    print()
    print("/// One port of the set: where it is written and where it is registered.")
    print("pub struct ZeekServerPort {")
    print("    pub proto: &'static str,")
    print("    pub port: u16,")
    print("    /// The script and line holding the port literal.")
    print("    pub script: &'static str,")
    print("    pub line: u32,")
    print("    /// The script and line of the registration that adds it to the set.")
    print("    pub registered_at: &'static str,")
    print("    pub registered_line: u32,")
    print("    /// The analyzer registered.")
    print("    pub analyzer: &'static str,")
    print("}")
    print()
    print("/// Every entry, by protocol and port (a port may appear more than once:")
    print("/// two registrations of it).")
    print("pub const ZEEK_SERVER_PORTS: &[ZeekServerPort] = &[")
    for port, proto, dpath, dline, rpath, rline, tag in entries:
        print(f"    ZeekServerPort {{ proto: \"{proto}\", port: {port}, script: \"{dpath}\", line: {dline}, "
              f"registered_at: \"{rpath}\", registered_line: {rline}, analyzer: \"{tag}\" }},")
    print("];")
    for proto in ("tcp", "udp"):
        ports = sorted({e[0] for e in entries if e[1] == proto})
        print()
        print(f"/// The {proto.upper()} ports of [`ZEEK_SERVER_PORTS`], each once.")
        print(f"pub const ZEEK_{proto.upper()}_SERVER_PORTS: &[u16] = &[{', '.join(map(str, ports))}];")


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


if __name__ == "__main__":
    main()
