#!/usr/bin/env python3
"""Finds import circles between the rooms of src/host and between the files of src/runtime.

A room of src/host is one entry at its top level: a folder (`terminals/`, `browser/`, …)
or a single file (`links.rs`). A node of src/runtime is one file. An edge A -> B means
some code in A names B by path: a `use` line or an inline path (`crate::host::B::…`,
`super::B…`, `crate::runtime::Name` with `Name` re-exported from B by its `mod.rs`).
Unit-test modules (`#[cfg(test)]` followed by `mod NAME {`) are left out: a test may
reach anywhere. Comments and string literals are left out too.

Prints every edge, then each circle found (a strongly connected component of more than
one node), and exits 1 if there is one.

    python3 docs/import-circles.py [ROOT]     # ROOT: the crate's folder (default: this one's)
"""
import os
import re
import sys

TEST_MODULE = re.compile(r"\s*(pub(\(crate\))? )?mod \w+ \{")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def code_without_tests(path):
    """The file's text without unit-test modules, comments and string literals."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    kept, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]" and i + 1 < len(lines) and TEST_MODULE.match(lines[i + 1]):
            depth, i = 0, i + 1
            while i < len(lines):
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth == 0:
                    break
            continue
        kept.append(lines[i])
        i += 1
    return strip_comments_and_literals("\n".join(kept))


def strip_comments_and_literals(text):
    """Rust text with comments removed and string and character literals emptied."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = len(re.match(r"r(#*)", text[i:]).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            out.append('""')
            i = n if end < 0 else end + 1 + hashes
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:]):
            i += re.match(r"'(\\.[^']*|[^\\'])'", text[i:]).end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\w+$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:j])
            start = j + 1
    parts.append(inner[start:])
    return [p for part in parts if part for p in expand_use_tree(prefix + part)]


def paths_in(text):
    """Every path the code names: use trees expanded, plus inline `a::b::c` paths."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        found += expand_use_tree(m.group(1))
    text_without_uses = re.sub(r"\buse\s+[^;]+;", "", text)
    found += re.findall(rf"\b(?:crate|super|self)(?:::{IDENT})+", text_without_uses)
    return found


def reexports(mod_rs):
    """Names a folder's mod.rs re-exports: {name: first path segment it comes from}."""
    names = {}
    for path in paths_in(code_without_tests(mod_rs)):
        segments = path.split("::")
        if len(segments) >= 2 and segments[0] not in ("crate", "super", "self", "std"):
            names[segments[-1]] = segments[0]
    return names


def module_names(folder):
    return {e[:-3] if e.endswith(".rs") else e for e in os.listdir(folder)
            if (e.endswith(".rs") and e != "mod.rs") or os.path.isdir(os.path.join(folder, e))}


def node_of(segments, nodes, exported):
    """The node a path below the folder names: a module, or a name re-exported from one."""
    if not segments:
        return None
    if segments[0] in nodes:
        return segments[0]
    return exported.get(segments[0])


def edges_of(folder, crate_prefix, node_for_file):
    """Edges between the nodes of `folder` (`crate_prefix` is its path, e.g. crate::host)."""
    nodes = module_names(folder)
    exported = reexports(os.path.join(folder, "mod.rs"))
    edges = set()
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            source = node_for_file(os.path.relpath(path, folder))
            if source is None:
                continue
            rel = os.path.relpath(path, folder).split(os.sep)
            for p in paths_in(code_without_tests(path)):
                segments = p.split("::")
                if segments[:len(crate_prefix)] == crate_prefix:
                    target = node_of(segments[len(crate_prefix):], nodes, exported)
                elif segments[0] in ("super", "self"):
                    up = 0
                    while up < len(segments) and segments[up] == "super":
                        up += 1
                    # Module path of the file below the folder, then climb `up` levels.
                    here = [s[:-3] if s.endswith(".rs") else s for s in rel]
                    if here[-1] == "mod":
                        here.pop()
                    if up > len(here):
                        continue
                    if up == len(here):
                        target = node_of(segments[up:], nodes, exported)
                    else:
                        target = here[0]
                else:
                    continue
                if target and target != source:
                    edges.add((source, target))
    return nodes, edges


def circles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    failed = False
    checks = [
        # A room of src/host: the first segment of the file's path (mod.rs is the façade).
        ("src/host", ["crate", "host"],
         lambda rel: None if rel == "mod.rs" else rel.split(os.sep)[0].removesuffix(".rs")),
        # A node of src/runtime: each file (mod.rs only re-exports and declares).
        ("src/runtime", ["crate", "runtime"],
         lambda rel: None if rel == "mod.rs" else rel.removesuffix(".rs").split(os.sep)[0]),
    ]
    for folder, prefix, node_for_file in checks:
        nodes, edges = edges_of(folder, prefix, node_for_file)
        print(f"{folder}: {len(nodes)} {'rooms' if folder == 'src/host' else 'files'}, {len(edges)} edges")
        for a, b in sorted(edges):
            print(f"  {a} -> {b}")
        for component in circles(nodes, edges):
            failed = True
            print(f"  CIRCLE in {folder}: {' <-> '.join(component)}")
    if failed:
        print("import-circles: circles found (move what both sides share down, or hand it in)",
              file=sys.stderr)
        sys.exit(1)
    print("import-circles: no circle between the rooms of src/host or the files of src/runtime")


main()
