#!/usr/bin/env python3
"""The layer and size rules of the workspace, checked without building (scripts/test.sh
runs this before cargo):

1. no Rust source file under crates/ is over 1,000 lines;
2. a crate depends only on crates in a layer below its own (CRATE_LAYERS);
3. inside the library (crates/hoprag/src), a top-level module imports only from
   modules in a layer below its own (LIBRARY_LAYERS), except the known back edges of
   KNOWN_BACK_EDGES, each of which an issue is to remove;
4. `#[allow(clippy::too_many_arguments)]` is never given to a whole module or crate
   (`#![allow(...)]`, or on a `mod` item), and clippy's argument threshold is clippy's;
5. inside every folder of every crate (crates/*/src), no two modules import each other,
   directly or round a longer loop (the library's top level is rule 3's);
6. a method's name is a string literal in at most two source files (its own and one
   other, e.g. a constant of a lower layer naming the same thing): everything else
   reads the method registry (crates/hoprag/src/retrieve/registry.rs).

Prints what breaks a rule and a summary line `N passed, M failed`; exits 1 on a failure.
Python 3 standard library only.

Usage: scripts/check_layers.py [--edges]   (--edges: print the library's module imports)
"""

import json
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LIBRARY_SRC = os.path.join(ROOT, "crates", "hoprag", "src")
MAX_LINES = 1000

# Bottom first. A crate may depend on crates of lower layers only: the Python extension
# (beside the benchmarks and the server) on the library alone, the CLI on all of them.
CRATE_LAYERS = [
    ["hoprag"],
    ["hoprag-bench", "hoprag-serve", "hoprag-py"],
    ["hoprag-cli"],
]

# The top-level modules of the library, bottom first: a module imports (`crate::...`)
# only from modules of lower layers, never from its own layer or above. A new module
# goes in the lowest layer above everything it imports.
LIBRARY_LAYERS = [
    # Leaves: they import nothing of the crate.
    ["error", "simd", "threads", "rank", "text", "progress"],
    ["lazy", "http", "llama", "files"],
    ["models", "corpus"],
    ["embed", "dataset", "llm", "fusion", "filter"],
    ["answer", "index"],
    ["graph"],
    ["store"],
    ["retrieve"],
    ["config"],
    ["engine"],
    ["response", "eval"],
]

# Imports against the layers that exist today, each with what removes it. Empty this as
# they go: an entry the code no longer needs is reported, so the list only shrinks.
KNOWN_BACK_EDGES = {}


def rust_files(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", ".git", "node_modules"))
        for name in sorted(filenames):
            if name.endswith(".rs"):
                yield os.path.join(dirpath, name)


def rel(path):
    return os.path.relpath(path, ROOT)


def strip_comments_and_strings(src):
    """The code without comments and string contents (so doc links and messages that
    name a module are not imports)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 260]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or src.startswith("'\\u{", i):
            j = src.find("'", i + 1 if src[i + 1] != "\\" else i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_sizes():
    errors = []
    for path in rust_files(os.path.join(ROOT, "crates")):
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_LINES:
            errors.append(f"{rel(path)}: {lines} lines (at most {MAX_LINES}: split it by idea)")
    return errors


def check_crates():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    )
    layer = {name: i for i, names in enumerate(CRATE_LAYERS) for name in names}
    members = {p["name"] for p in meta["packages"]}
    errors = []
    for package in sorted(meta["packages"], key=lambda p: p["name"]):
        name = package["name"]
        if name not in layer:
            errors.append(f"crate {name}: not in CRATE_LAYERS of {rel(__file__)}; add it to the layer it belongs to")
            continue
        for dep in package["dependencies"]:
            if dep["name"] not in members:
                continue
            kind = dep["kind"] or "normal"
            if dep["name"] not in layer:
                continue  # reported as a crate of its own above
            if layer[dep["name"]] >= layer[name]:
                errors.append(
                    f"crate {name} depends on {dep['name']} ({kind}), which is not in a layer below it "
                    f"(layers, bottom first: {CRATE_LAYERS})"
                )
    return errors


def library_modules():
    """Top-level module of every file of the library, and the items lib.rs re-exports
    (`crate::Config` is the `config` module's)."""
    modules = {}
    for path in rust_files(LIBRARY_SRC):
        parts = os.path.relpath(path, LIBRARY_SRC).split(os.sep)
        top = parts[0][:-3] if len(parts) == 1 else parts[0]
        if top != "lib":
            modules[path] = top
    with open(os.path.join(LIBRARY_SRC, "lib.rs"), encoding="utf-8") as f:
        lib = strip_comments_and_strings(f.read())
    reexports = {}
    for m in re.finditer(r"\bpub\s+use\s+(\w+)::(\{[^}]*\}|\w+)\s*;", lib):
        for item in re.findall(r"\w+", m.group(2)):
            reexports[item] = m.group(1)
    return modules, reexports


def crate_paths(code):
    """The first segment after every `crate::`, braces of a `use crate::{a, b::c}`
    opened: `a`, `b`."""
    for m in re.finditer(r"\bcrate\s*::\s*", code):
        i = m.end()
        if i < len(code) and code[i] == "{":
            depth, start, j = 1, i + 1, i + 1
            while j < len(code) and depth:
                c = code[j]
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                if depth == 0 or (c == "," and depth == 1):
                    first = re.match(r"\s*(\w+)", code[start:j])
                    if first:
                        yield first.group(1)
                    start = j + 1
                j += 1
        else:
            first = re.match(r"(\w+)", code[i:])
            if first:
                yield first.group(1)


def library_edges():
    """{(importer, imported): [files]} between the library's top-level modules."""
    modules, reexports = library_modules()
    tops = set(modules.values())
    edges, unknown = defaultdict(list), []
    for path, top in sorted(modules.items()):
        with open(path, encoding="utf-8") as f:
            code = strip_comments_and_strings(f.read())
        for name in sorted(set(crate_paths(code))):
            target = name if name in tops else reexports.get(name)
            if target is None:
                unknown.append(f"{rel(path)}: crate::{name} is neither a module nor an item lib.rs re-exports")
            elif target != top:
                edges[(top, target)].append(rel(path))
    return edges, tops, unknown


def check_library():
    edges, tops, errors = library_edges()
    layer = {name: i for i, names in enumerate(LIBRARY_LAYERS) for name in names}
    for top in sorted(tops - set(layer)):
        errors.append(f"module {top}: not in LIBRARY_LAYERS of {rel(__file__)}; add it to the layer it belongs to")
    used_allowances = set()
    for (src, dst), files in sorted(edges.items()):
        if src not in layer or dst not in layer or layer[dst] < layer[src]:
            continue
        if (src, dst) in KNOWN_BACK_EDGES:
            used_allowances.add((src, dst))
            continue
        where = "the same layer as" if layer[dst] == layer[src] else "a layer above"
        errors.append(f"module {src} imports {dst}, {where} it, in {', '.join(sorted(set(files)))}")
    for src, dst in sorted(set(KNOWN_BACK_EDGES) - used_allowances):
        errors.append(f"KNOWN_BACK_EDGES has {src} -> {dst}, which the code no longer needs: remove the entry")
    return errors


MODULE_LEVEL_ALLOW = re.compile(r"#!\s*\[\s*allow\s*\([^)]*\bclippy::too_many_arguments\b")
OUTER_ALLOW = re.compile(r"#\s*\[\s*allow\s*\([^)]*\bclippy::too_many_arguments\b[^\]]*\]")


def check_allows():
    errors = []
    for path in rust_files(os.path.join(ROOT, "crates")):
        with open(path, encoding="utf-8") as f:
            code = strip_comments_and_strings(f.read())
        for m in MODULE_LEVEL_ALLOW.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            errors.append(f"{rel(path)}:{line}: #![allow(clippy::too_many_arguments)] for a whole module or crate")
        for m in OUTER_ALLOW.finditer(code):
            rest = code[m.end():]
            # Skip the item's other attributes, then see whether the item is a module.
            rest = re.sub(r"^(\s*#\s*\[[^\]]*\])*\s*", "", rest)
            if re.match(r"(pub(\([^)]*\))?\s+)?mod\b", rest):
                line = code.count("\n", 0, m.start()) + 1
                errors.append(f"{rel(path)}:{line}: #[allow(clippy::too_many_arguments)] on a whole module")
    for name in ("clippy.toml", ".clippy.toml"):
        path = os.path.join(ROOT, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                if re.search(r"too-many-arguments-threshold", f.read()):
                    errors.append(f"{name}: changes clippy's too-many-arguments threshold")
    for path in [os.path.join(ROOT, "Cargo.toml")] + [
        os.path.join(ROOT, "crates", c, "Cargo.toml") for c in sorted(os.listdir(os.path.join(ROOT, "crates")))
    ]:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                if re.search(r"too_many_arguments\s*=", f.read()):
                    errors.append(f"{rel(path)}: sets the too_many_arguments lint for a whole crate")
    return errors


def module_path(path, src):
    """`retrieve/gear/agent.rs` -> ("retrieve", "gear", "agent"); mod.rs is its folder's
    module, lib.rs and main.rs the crate's."""
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


def check_folders():
    """Rule 5, for every crate's src folder."""
    errors = []
    for crate in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        src = os.path.join(ROOT, "crates", crate, "src")
        if os.path.isdir(src):
            # The library's top level is rule 3's (its layers); other crates' is checked here.
            errors += folder_loops(src, crate, top_level=os.path.normpath(src) != LIBRARY_SRC)
    return sorted(set(errors))


def folder_loops(src, crate, top_level):
    """The imports between sibling modules of every folder of `src` have no loop."""
    modules = {module_path(p, src): p for p in rust_files(src)}
    known = set(modules)

    def resolve(parts):
        # The longest prefix that is a module: `crate::graph::walk::Walker` is graph::walk.
        for n in range(len(parts), 0, -1):
            if tuple(parts[:n]) in known:
                return tuple(parts[:n])
        return None

    edges = defaultdict(set)  # (parent, a) -> {b}: a and b children of parent
    for mod, path in modules.items():
        with open(path, encoding="utf-8") as f:
            code = strip_comments_and_strings(f.read())
        targets = set()
        for m in re.finditer(r"\bcrate((?:\s*::\s*\w+)+)", code):
            targets.add(resolve(re.findall(r"\w+", m.group(1))))
        for m in re.finditer(r"\b((?:super\s*::\s*)+)(\w+(?:\s*::\s*\w+)*)", code):
            up = m.group(1).count("super")
            base = mod[: len(mod) - up] if up <= len(mod) else ()
            targets.add(resolve(list(base) + re.findall(r"\w+", m.group(2))))
        for t in targets:
            if not t or t == mod or t[: len(mod)] == mod or mod[: len(t)] == t:
                continue  # itself, or an ancestor or descendant of it
            common = 0
            while mod[common] == t[common]:
                common += 1
            if common == 0 and not top_level:
                continue  # between top-level modules: rule 3
            edges[(mod[:common], mod[common])].add(t[common])
    errors = []
    parents = sorted({p for p, _ in edges})
    for parent in parents:
        graph = {a: bs for (p, a), bs in edges.items() if p == parent}
        # A loop: b reaches a while a imports b.
        for a in sorted(graph):
            for b in sorted(graph[a]):
                seen, todo = set(), [b]
                while todo:
                    x = todo.pop()
                    if x == a:
                        errors.append(f"{'::'.join((crate,) + parent)}: {a} and {b} import each other (directly or round a loop)")
                        break
                    if x not in seen:
                        seen.add(x)
                        todo.extend(graph.get(x, ()))
                else:
                    continue
                break
    return sorted(set(errors))


def method_names():
    """The names the registry's methods state (`name: "..."` of each MethodSpec)."""
    names = set()
    for path in rust_files(os.path.join(LIBRARY_SRC, "retrieve")):
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r"MethodSpec\s*=\s*MethodSpec\s*\{\s*name:\s*\"(\w+)\"", f.read()))
    return names


def check_method_names():
    """Rule 6: each method name as a string literal in at most two source files."""
    names = method_names()
    if len(names) < 10:
        return [f"found only {len(names)} methods in the registry ({sorted(names)}): has MethodSpec changed shape?"]
    where = defaultdict(set)
    for crate in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        src = os.path.join(ROOT, "crates", crate, "src")
        files = list(rust_files(src)) + [
            os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".js")
        ]
        for path in files:
            with open(path, encoding="utf-8") as f:
                code = f.read()
            for literal in set(re.findall(r"[\"']([a-z_0-9]+)[\"']", code)):
                if literal in names:
                    where[literal].add(rel(path))
    return [
        f"method {name!r} is a string literal in {len(files)} files (at most 2: read the registry): {', '.join(sorted(files))}"
        for name, files in sorted(where.items())
        if len(files) > 2
    ]


CHECKS = [
    (f"no source file over {MAX_LINES} lines", check_sizes),
    ("crates depend only on lower layers", check_crates),
    ("library modules import only from lower layers", check_library),
    ("too_many_arguments allowed per function only", check_allows),
    ("no import loops inside a folder of a crate", check_folders),
    ("method names only in their own file and the registry", check_method_names),
]


def main():
    if "--edges" in sys.argv[1:]:
        edges, _, unknown = library_edges()
        for (src, dst), files in sorted(edges.items()):
            print(f"{src} -> {dst}  ({len(set(files))} files)")
        for line in unknown:
            print(line)
        return 0
    passed = failed = 0
    for title, check in CHECKS:
        errors = check()
        if errors:
            failed += 1
            print(f"FAIL {title}:")
            for e in errors:
                print(f"  {e}")
        else:
            passed += 1
            print(f"ok   {title}")
    print(f"check_layers: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
