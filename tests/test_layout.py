"""The package shows its floors (DESIGN §8) and its imports only point down.

Read from the source with ``ast``, so an import made inside a function counts as much as one at
the top of a module: no circle at all, no arrow up a floor, the readers of floor 2 beside each
other, at most eight modules at the root, and every package saying its floor.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "c3async"

# Floors, from the ground up; a unit is a top-level package of c3async (the doors: the root's
# modules and the Hub). Within floor 2 the catalog comes first, the stores read it, and the
# other readers use both but never each other.
RANK = {
    "ground": (1, 0),
    "catalog": (2, 0),
    "stores": (2, 1),
    "live": (2, 2),
    "tasks": (2, 2),
    "usage": (2, 2),
    "search": (2, 2),
    "sessions": (3, 0),
    "doors": (4, 0),
}
FLOOR_WORDS = {1: "Floor 1", 2: "Floor 2", 3: "Floor 3", 4: "Floor 4"}
MAX_ROOT_MODULES = 8


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, wherever the import statement stands."""
    mods = modules(root)
    top = root.name
    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # ``from pkg import mod`` imports the module; ``from mod import name`` the module.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name and target != top:
                    edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "doors"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import that does not point down a floor (or, within floor 2, down its order)."""
    wrong = []
    for source, targets in edges.items():
        for target in targets:
            a, b = unit(source), unit(target)
            if a != b and not RANK[a] > RANK[b]:
                wrong.append(f"{source} -> {target}")
    return sorted(wrong)


def test_no_import_circles_counting_imports_inside_functions() -> None:
    assert circles(imports(PACKAGE)) == []


def test_imports_only_point_down_the_floors() -> None:
    assert upward(imports(PACKAGE)) == []


def test_at_most_eight_modules_at_the_root_and_each_package_says_its_floor() -> None:
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= MAX_ROOT_MODULES, root_modules
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert set(packages) == set(RANK) - {"doors"} | {"hub"}, packages
    for name in packages:
        floor = RANK[name][0] if name in RANK else 4
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        assert doc.startswith(FLOOR_WORDS[floor]), (name, doc[:60])
    assert "Floor 4" in (ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or "")


def test_the_check_finds_a_circle_made_inside_a_function_and_an_arrow_up(tmp_path: Path) -> None:
    root = tmp_path / "c3async"
    for folder in ("ground", "sessions"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "ground" / "a.py").write_text("from . import b\n")
    (root / "ground" / "b.py").write_text(textwrap.dedent("""
        def later():
            from .a import thing
            from ..sessions import view
    """))
    (root / "ground" / "c.py").write_text("")
    (root / "sessions" / "view.py").write_text("from ..ground import c\n")
    edges = imports(root)
    assert circles(edges) == [["c3async.ground.a", "c3async.ground.b"]]
    assert upward(edges) == ["c3async.ground.b -> c3async.sessions.view"]
