#!/usr/bin/env python3
"""Checks that python/lsio's modules import each other without cycles (architecture.md §2:
dependencies point down, in Python too). Every relative import counts, at module level or
inside a function, since a deferred import is still a dependency. Exits 1 printing a cycle.
"""

from __future__ import annotations

import ast
import pathlib
import sys

PKG = pathlib.Path(__file__).resolve().parent.parent / "python" / "lsio"


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def graph() -> dict:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    edges: dict = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package.split(".") if package else []
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join(base + ([node.module] if node.module else []))
            # `from . import a, b`: each name may be a module.
            candidates = [f"{target}.{a.name}".strip(".") for a in node.names] if not node.module else [target]
            for c in candidates:
                if c in modules and c != name:
                    edges[name].add(c)
    return edges


def find_cycle(edges: dict):
    state: dict = {}
    stack: list = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def main() -> int:
    cycle = find_cycle(graph())
    if cycle:
        print("import cycle in python/lsio: " + " -> ".join(cycle))
        return 1
    print("python/lsio: no import cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
