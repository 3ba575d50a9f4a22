#!/usr/bin/env bash
# The library's stages only look down: lists every `crate::` edge between the stage modules of
# src/ (`use crate::...` trees, `crate::` and `super::` paths in code), prints them by stage and
# fails (exit 1) on any edge from a lower stage to a higher one, naming each file:line.
# Usage: scripts/check-layers.sh [-v]   (-v: also every allowed edge, file:line)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os, re, sys

# Stages, bottom to top; a module may use only its own stage and lower ones. Longest prefix of
# the module path wins. The table is the order documented in src/lib.rs ("Architecture").
STAGES = [
    # 1. plain data and helpers (rows, statistics, report types, line profiles, files...)
    ("data", 1), ("error", 1), ("config", 1), ("fasthash", 1), ("checkpoint", 1),
    # 2. storage: the spool, beneath both the flusher and finalize
    ("spool", 2),
    # 3. sinks; the live metrics are one (the flusher feeds them, the guard serves them)
    ("sink", 3), ("metrics", 3),
    # 4. recording: the hot path and its state (`recording::shared`); `fork` (what a forked
    #    child does with the recording state it inherited) works on that state alone
    ("recording", 4), ("fork", 4),
    # 5. the flusher
    ("flusher", 5),
    # 6. output formats (HDF5, the summary)
    ("output", 6),
    # 7. finalize: the pipeline and its publishers (single file, MPI relay, MPI parallel)
    ("finalize", 7), ("mpi", 7),
    # 8. read
    ("read", 8),
    # 9. the session, above every stage of the library: the crate root (its re-exports) and
    #    the builder (with the overhead probe, which runs a whole profiler), which build every
    #    stage and hand the user the layer and the guard
    ("", 9), ("builder", 9),
    # 10. the CLI: src/bin, a crate of its own on the public API (not scanned: it is the top)
]
NAMES = {1: "data", 2: "storage", 3: "sinks", 4: "recording", 5: "flusher", 6: "output",
         7: "finalize", 8: "read", 9: "session", 10: "cli"}
verbose = "-v" in sys.argv[1:]

def stage_of(mod):
    best, level = -1, None
    for prefix, lv in STAGES:
        p = prefix.split("::") if prefix else []
        if mod[:len(p)] == p and len(p) > best:
            best, level = len(p), lv
    return level

# Every module file of the library (src/bin is the CLI, the top stage: it is not checked).
files = {}
for root, dirs, names in os.walk("src"):
    dirs[:] = [d for d in dirs if not (root == "src" and d == "bin")]
    for n in names:
        if not n.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(root, n), "src")[:-3].split(os.sep)
        if rel[-1] in ("mod", "lib"):
            rel = rel[:-1]
        files[os.path.join(root, n)] = rel
modules = {tuple(m) for m in files.values()}

def strip(text):
    # Comments out (doc links are not edges), string and raw-string contents blanked, char
    # literals too; line numbers kept.
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and re.match(r'b?r#*"', text[i:i + 40]):
            m = re.match(r'b?r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)

# Exempt: code compiled only for tests (`#[cfg(test)] mod x;` files, or any item under a cfg
# naming `test`: inline test modules, test helpers, their `use`s). A test may build a lower
# stage's input through a higher one; the library itself never does.
CFG_TEST = re.compile(r"#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
test_mods = set()
texts = {}
for path, mod in files.items():
    texts[path] = strip(open(path, encoding="utf-8").read())
    for m in CFG_TEST.finditer(texts[path]):
        if m.group(2) == ";":
            test_mods.add(tuple(mod) + (m.group(1),))

def is_test(mod):
    return any(tuple(mod[:k]) in test_mods for k in range(1, len(mod) + 1))

def test_spans(text):
    # Items under a test-only cfg: an inline module, a function, a `use`, up to its matching
    # brace (or its `;`).
    spans = []
    for m in re.finditer(r"#\[cfg\([^\]]*\btest\b[^\]]*\)\]", text):
        j = m.end()
        semi, brace = text.find(";", j), text.find("{", j)
        if brace < 0 or 0 <= semi < brace:
            spans.append((m.start(), semi + 1 if semi >= 0 else len(text)))
            continue
        depth, j = 1, brace + 1
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        spans.append((m.start(), j))
    return spans

def expand(tree):
    # `a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]
    tree = re.sub(r"\s+", "", tree)
    out, depth, cur, parts = [], 0, "", []
    i = tree.find("{")
    if i < 0:
        return [tree]
    head, body = tree[:i], tree[i + 1:tree.rfind("}")]
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur); cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    for p in parts:
        if p:
            out += [head + q for q in expand(p)]
    return out

# Items the crate root re-exports (`pub use x::y::Z;`) resolve to where they live.
root_reexports = {}
for m in re.finditer(r"pub use ([^;]+);", texts["src/lib.rs"]):
    for p in expand(m.group(1)):
        segs = p.split("::")
        root_reexports[segs[-1].split(" as ")[-1]] = segs

def resolve(segs, here):
    # A path's segments (after `crate`/`super`) -> the module it names, or None.
    if segs and segs[0] in root_reexports and (segs[0],) not in modules:
        segs = root_reexports[segs[0]]
    for k in range(len(segs), 0, -1):
        if tuple(segs[:k]) in modules:
            return list(segs[:k])
    return [] if segs else None

PATH = re.compile(r"(?<![\w$])((?:crate|super)(?:::(?:super|self|\w+|\{))+)")
edges, upward, tests_skipped = {}, [], 0
for path, mod in sorted(files.items()):
    text = texts[path]
    spans = test_spans(text)
    here = stage_of(mod)
    uses = []
    for m in re.finditer(r"\buse\s+((?:crate|super)::[^;]*);", text):
        for p in expand(m.group(1)):
            uses.append((m.start(), p.split(" as ")[0]))
    used_spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+(?:crate|super)::[^;]*;", text)]
    for m in PATH.finditer(text):
        if any(a <= m.start() < b for a, b in used_spans):
            continue
        if text[max(0, m.start() - 4):m.start()] == "in ":  # pub(in crate::x): visibility
            continue
        uses.append((m.start(), m.group(1).rstrip(":{")))
    for pos, p in uses:
        segs = [s for s in p.split("::") if s and s != "self"]
        if segs[0] == "crate":
            segs = segs[1:]
        else:
            base = list(mod)
            while segs and segs[0] == "super":
                base = base[:-1]; segs = segs[1:]
            segs = base + segs
        target = resolve(segs, mod)
        if target is None:
            continue
        there = stage_of(target)
        line = text.count("\n", 0, pos) + 1
        if is_test(mod) or any(a <= pos < b for a, b in spans):
            tests_skipped += 1
            continue
        if here == there and mod[:1] == target[:1]:
            continue
        key = (NAMES[here], NAMES[there], here < there)
        edges.setdefault(key, []).append(f"{path}:{line}: {'::'.join(mod) or 'crate'} -> {'::'.join(target) or 'crate'}")
        if there > here:
            upward.append(f"{path}:{line}: {NAMES[here]} ({'::'.join(mod)}) uses {NAMES[there]} ({'::'.join(target)}) [{p}]")

print("check-layers: edges between stages (from -> to: count)")
for (a, b, up), where in sorted(edges.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
    print(f"  {a:>9} -> {b:<9} {len(where):4}{'  UPWARD' if up else ''}")
    if verbose and not up:
        for w in where:
            print(f"      {w}")
print(f"check-layers: {tests_skipped} paths in test-only modules not checked")
if upward:
    print(f"check-layers: {len(upward)} upward edges:")
    for u in upward:
        print("  " + u)
    sys.exit(1)
print("check-layers: ok, no upward edge")
PY
