#!/usr/bin/env python3
"""Counts the import circles of the crate's source: which files and which top-level folders of
src/ import each other in a circle, and how many imports point up.

Usage: scripts/dev/import_circles.py [--check BASELINE] [SRC_DIR]   (default: src/ of this checkout)

With --check (what `make lint` runs; it lists the circles, not the upward imports, with scripts/dev/import_circles.baseline) it also fails,
exit status 1, when there is any folder circle, or more file circles, or more files in them,
than the baseline file allows: a change may close circles (then lower the baseline), never add
one.

An import is a `crate::`, `super::` or `self::` path outside `#[cfg(test)]` code and comments
(in `use` trees and inline), resolved to the file that defines the named item: a path through a
module's face (`pub use` in its mod.rs) is followed to the file the name comes from. Between
files, an edge A -> B means A uses an item defined in B; between folders, the same edges with
each file replaced by its top-level folder under src/ (a file at src/'s root is a node of its
own). A circle is a strongly connected set of more than one node. An upward import is a file
reaching an item through the face (mod.rs) of a folder that contains it, where the face only
re-exports the item from another file (a child importing through its parent instead of from
the defining file; the crate root's re-exports, `crate::Result` and the like, are not counted).
A trait or type defined in a face and used by its children is a plain downward edge.
The output ends with one line of counts, comparable across commits.
"""
import argparse
import re
import sys
from pathlib import Path

_args = argparse.ArgumentParser(description="Counts the import circles of the crate's source.")
_args.add_argument("--check", metavar="BASELINE", type=Path,
                   help="fail on a folder circle or on more file circles than BASELINE allows")
_args.add_argument("src", nargs="?", type=Path,
                   default=Path(__file__).resolve().parent.parent.parent / "src")
ARGS = _args.parse_args()
SRC = ARGS.src.resolve()


def module_of(path: Path) -> tuple:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests_and_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line.split("//")[0] if not line.lstrip().startswith("//") else "" for line in text.splitlines())
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = m.end()
        semi, brace = text.find(";", j), text.find("{", j)
        if brace == -1 or (semi != -1 and semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k
    out.append(text[i:])
    return "".join(out)


def expand_use(tree: str) -> list:
    """`a::{b, c::{d as e}}` -> ['a::b', 'a::c::d@e'] (an alias after `@`)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    brace = tree.find("{")
    if brace == -1:
        return [tree] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    return [p for it in items if it for p in expand_use(prefix + it)]


files = {module_of(p): p for p in SRC.rglob("*.rs") if "bin" not in p.relative_to(SRC).parts[:1]}
# Files that are test modules (`#[cfg(test)] mod tests;`) are not part of the library.
for m, p in list(files.items()):
    for child in re.findall(r"#\[cfg\(test\)\]\s*mod\s+(\w+)\s*;", p.read_text()):
        files.pop(m + (child,), None)
code = {m: strip_tests_and_comments(p.read_text()) for m, p in files.items()}
# Names each module re-exports: name -> absolute path of the source.
reexports = {m: {} for m in files}


def absolute(module: tuple, path: str) -> tuple:
    segs = path.replace(" ", "").split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = module
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        base = module  # a child module's name, as in `pub use ddp::Ddp`
    return tuple(base) + tuple(s for s in segs if s)


for m, text in code.items():
    for vis, tree in re.findall(r"\b(pub(?:\([^)]*\))?\s+)use\s+([^;]+);", text):
        for p in expand_use(tree):
            if p.startswith(("tch", "std", "serde", "libc")):
                continue
            full = absolute(m, p.split("@")[0])
            name = p.split("@")[1] if "@" in p else full[-1]
            if name != "*":
                reexports[m][name] = full


def resolve(path: tuple, depth: int = 0):
    """The module (file) that defines the item at `path`."""
    for cut in range(len(path), -1, -1):
        mod = path[:cut]
        if mod in files:
            rest = path[cut:]
            if rest and rest[0] in reexports[mod] and depth < 20:
                target = reexports[mod][rest[0]]
                if target != path:
                    return resolve(target + rest[1:], depth + 1)
            return mod
    return None


edges, upward = set(), set()
for m, text in code.items():
    paths = []
    for tree in re.findall(r"\buse\s+((?:crate|super|self)::[^;]+);", text):
        paths += expand_use(tree)
    paths += re.findall(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", re.sub(r"\buse\s+[^;]+;", "", text))
    for p in (p.split("@")[0] for p in paths):
        target = resolve(absolute(m, p))
        if target is None or target == m:
            continue
        edges.add((m, target))
        full = absolute(m, p)
        face = next(full[:cut] for cut in range(len(full), -1, -1) if full[:cut] in files)
        rest = full[len(face):]
        through_face = (face != m and m[:len(face)] == face and rest
                        and rest[0] in reexports[face] and target != face)
        if through_face and face != ():
            upward.add((m, face, p))


def sccs(nodes, adj):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "/".join(m) or "lib"


file_adj = {}
for a, b in edges:
    file_adj.setdefault(a, set()).add(b)
folder = lambda m: m[0] if m else "lib"
folder_adj = {}
for a, b in edges:
    if folder(a) != folder(b):
        folder_adj.setdefault(folder(a), set()).add(folder(b))
file_circles = sccs(sorted(files), file_adj)
folder_circles = sccs(sorted({folder(m) for m in files}), folder_adj)
print(f"src: {SRC} ({len(files)} files, {len(edges)} imports between files)")
for c in folder_circles:
    print("folder circle:", " <-> ".join(c))
    for a, b in sorted(edges):
        if folder(a) in c and folder(b) in c and folder(a) != folder(b):
            print(f"    {name(a)} -> {name(b)}")
for c in file_circles:
    print("file circle:", " <-> ".join(name(m) for m in c))
for a, b, p in sorted(upward) if not ARGS.check else ():  # the check lists only circles
    print(f"upward: {name(a)} -> {name(b)} ({p})")
print(f"folder circles: {len(folder_circles)} ({sum(map(len, folder_circles))} folders), "
      f"file circles: {len(file_circles)} ({sum(map(len, file_circles))} files), "
      f"upward imports: {len(upward)}")


def read_baseline(path: Path) -> dict:
    """`name = number` lines; `#` starts a comment."""
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not value.strip().isdigit():
            sys.exit(f"{path}:{n}: expected `name = number`, got {line!r}")
        out[key.strip()] = int(value)
    for key in ("file_circles", "files_in_file_circles"):
        if key not in out:
            sys.exit(f"{path}: no `{key} = N` line")
    return out


if ARGS.check:
    limits = read_baseline(ARGS.check)
    found = {"file_circles": len(file_circles),
             "files_in_file_circles": sum(map(len, file_circles))}
    failures = []
    if folder_circles:
        failures.append(f"{len(folder_circles)} folder circle(s) (listed above); none is allowed: "
                        "move the name one side imports from the other down to a floor both use")
    for key, value in found.items():
        if value > limits[key]:
            failures.append(f"{key} = {value}, above the baseline's {limits[key]} "
                            f"({ARGS.check}): a new file circle (listed above)")
        elif value < limits[key]:
            print(f"note: {key} = {value}, below the baseline's {limits[key]}: "
                  f"lower it in {ARGS.check}")
    for f in failures:
        print(f"import circles: error: {f}", file=sys.stderr)
    sys.exit(1 if failures else 0)
