#!/usr/bin/env python3
"""Checks the structure of src/: no include cycle, and every function a
header declares is defined by its unit.

A unit is a .c file with its header: src/a/foo.c, src/a/foo.h and
src/a/foo_internal.h are one unit, "a/foo". Each `#include "..."` that names
a file of src/ (from src/, as the build's include path does, or from the
including file's folder) is an edge from the including unit to the included
one. Every unit must depend only on units below it: a cycle among units
fails the check, and the message names it (a -> b -> a).

A function a header declares (a prototype at file scope, not static) must
be defined in a .c file of the same unit: a header says what its own .c
defines, not what others do.

    check-includes.py [--allow DIR]... SRC

--allow DIR (relative to SRC) reports cycles among units all under DIR,
and declarations there, without failing: for a folder being reworked.
Exits 0 when the check holds, 1 when it does not, 2 on bad usage.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit_of(rel):
    base, _ = os.path.splitext(rel)
    if base.endswith("_internal"):
        base = base[: -len("_internal")]
    return base


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


def sources(src):
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(root, f)
                yield os.path.relpath(path, src).replace(os.sep, "/")


def include_graph(src, files):
    graph = {}
    known = set(files)
    for rel in files:
        u = unit_of(rel)
        graph.setdefault(u, {})
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            text = strip_comments(f.read())
        for name in INCLUDE.findall(text):
            here = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            target = name if name in known else here if here in known else None
            if target is None:
                continue
            v = unit_of(target)
            if v != u:
                graph[u].setdefault(v, (rel, target))
    return graph


def cycles(graph):
    """The strongly connected components of more than one unit (Tarjan),
    each as one cycle through some of its units."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:
        members = set(comp)
        # A shortest way back to the first unit, within the component.
        start = comp[0]
        prev, todo = {start: None}, [start]
        back = None
        while todo and back is None:
            nxt = []
            for v in todo:
                for w in sorted(graph[v]):
                    if w not in members:
                        continue
                    if w == start:
                        back = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if back is not None:
                    break
            todo = nxt
        path, v = [], back
        while v is not None:
            path.append(v)
            v = prev[v]
        path.reverse()
        out.append((comp, path + [start]))
    return out


def declarations(text):
    """Names of the non-static functions declared at file scope."""
    text = strip_comments(text)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", text)
    # Bodies (struct, enum, inline function) end a statement.
    flat, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                flat.append(";")
        elif depth == 0:
            flat.append(ch)
    names = []
    for stmt in "".join(flat).split(";"):
        stmt = " ".join(stmt.split())
        if not stmt or re.match(r"(typedef|static|extern\s+const|struct\s+\w+\s*$|enum|union)\b", stmt):
            continue
        m = re.match(r"[\w\s\*]*?\b(\w+)\s*\(", stmt)
        if m and not re.search(r"\(\s*\*", stmt[: m.end() + 2]):
            names.append(m.group(1))
    return names


def defined(name, texts):
    pat = re.compile(r"\b%s\s*\([^;{}]*\)\s*\{" % re.escape(name))
    return any(pat.search(t) for t in texts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allow", action="append", default=[],
                    help="a folder of SRC whose cycles only warn")
    ap.add_argument("src")
    a = ap.parse_args()
    src = a.src
    if not os.path.isdir(src):
        print(f"check-includes: {src}: not a folder", file=sys.stderr)
        return 2
    allow = [d.strip("/") + "/" for d in a.allow]

    def allowed(units):
        return any(all(u.startswith(d) for u in units) for d in allow)

    files = list(sources(src))
    graph = include_graph(src, files)
    failed = False
    allowed_n = 0
    for comp, path in cycles(graph):
        steps = []
        for u, v in zip(path, path[1:]):
            steps.append(f"{graph[u][v][0]} includes {graph[u][v][1]}")
        msg = "include cycle: " + " -> ".join(path) + " (" + "; ".join(steps) + ")"
        if len(comp) > len(path) - 1:
            msg += "; the cycles join units " + ", ".join(comp)
        if allowed(comp):
            print("allowed " + msg)
            allowed_n += 1
        else:
            print(msg)
            failed = True

    by_unit = {}
    for rel in files:
        by_unit.setdefault(unit_of(rel), []).append(rel)
    for u, rels in sorted(by_unit.items()):
        bodies = []
        for rel in rels:
            if rel.endswith(".c"):
                with open(os.path.join(src, rel), encoding="utf-8") as f:
                    bodies.append(strip_comments(f.read()))
        for rel in rels:
            if not rel.endswith(".h"):
                continue
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                names = declarations(f.read())
            for name in names:
                if defined(name, bodies):
                    continue
                msg = (f"{rel}: declares {name}(), which no .c of its unit "
                       f"({u}.c) defines")
                if allowed([u]):
                    print("allowed " + msg)
                    allowed_n += 1
                else:
                    print(msg)
                    failed = True
    if failed:
        return 1
    print(f"check-includes: {len(graph)} units, no include cycle, "
          "every declared function defined in its unit"
          + (f" ({allowed_n} exceptions under --allow)" if allowed_n else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
