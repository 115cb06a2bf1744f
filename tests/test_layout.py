"""The package shows its floors (DESIGN §8) and its imports only point down.

Read from the source with ``ast``, so an import made inside a function counts as much as one at
the top of a module: no circle at all, no arrow up a floor, the readers of floor 2 beside each
other, at most eight modules at the root, and every package saying its floor.
"""

from __future__ import annotations

import ast
import builtins
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
    assert set(packages) == set(RANK) - {"doors"} | {"hub", "serve", "cli"}, packages
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
    (root / "ground" / "b.py").write_text(
        textwrap.dedent("""
        def later():
            from .a import thing
            from ..sessions import view
    """)
    )
    (root / "ground" / "c.py").write_text("")
    (root / "sessions" / "view.py").write_text("from ..ground import c\n")
    edges = imports(root)
    assert circles(edges) == [["c3async.ground.a", "c3async.ground.b"]]
    assert upward(edges) == ["c3async.ground.b -> c3async.sessions.view"]


# ---------------------------------------------------------------- one error tree, one answer a door

ERRORS = "c3async.ground.errors"
# Exceptions that live outside the tree, each argued in ground/errors.py's docstring: SIGTERM's
# twin of KeyboardInterrupt, defined with its handler, and three that never leave their module.
OUTSIDE_THE_TREE = {
    "c3async.ground.stop": ["Stopped"],
    "c3async.catalog.gitrefs": ["_Unreadable"],
    "c3async.ground.stateroot": ["_Problem"],
    "c3async.hub.server": ["_Stopped"],
}
ROOTS = ("C3Error", "TaskError")  # never raised themselves: an error is of a kind


def _last(node: ast.expr) -> str:
    """The name an expression ends in: ``disk.DiskFull`` -> ``DiskFull``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _trees(root: Path) -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in modules(root).items()}


def exception_classes(root: Path) -> dict[str, list[str]]:
    """Module -> the exception classes it defines (a base that is a builtin exception, or a
    class of the errors module), wherever the class statement stands."""
    trees = _trees(root)
    ours = {
        n.name for n in ast.walk(trees.get(f"{root.name}.ground.errors", ast.Module())) if isinstance(n, ast.ClassDef)
    }
    known = ours | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    found: dict[str, list[str]] = {}
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(_last(b) in known for b in node.bases):
                found.setdefault(name, []).append(node.name)
    return found


def roots_raised(root: Path) -> list[str]:
    """Where a root of the tree is made (``C3Error(...)``) outside the errors module."""
    made = []
    for name, tree in _trees(root).items():
        if name != f"{root.name}.ground.errors":
            made += [f"{name}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Call) and _last(n.func) in ROOTS]
    return made


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _names_in(node: ast.AST) -> set[str]:
    return {_last(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _catching(tree: ast.AST, names: set[str]) -> list[ast.ExceptHandler]:
    return [h for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler) and h.type and _names_in(h.type) & names]


def test_every_exception_is_defined_in_the_errors_module() -> None:
    found = exception_classes(PACKAGE)
    assert found.pop(ERRORS, None), "the errors module defines the tree"
    assert found == OUTSIDE_THE_TREE


def test_the_roots_of_the_tree_are_never_raised_themselves() -> None:
    assert roots_raised(PACKAGE) == []


def test_the_checks_find_an_exception_defined_elsewhere_and_a_root_raised(tmp_path: Path) -> None:
    root = tmp_path / "c3async"
    (root / "ground").mkdir(parents=True)
    for init in (root / "__init__.py", root / "ground" / "__init__.py"):
        init.write_text("")
    (root / "ground" / "errors.py").write_text("class C3Error(Exception): ...\nclass NotFound(C3Error): ...\n")
    (root / "ground" / "a.py").write_text(
        textwrap.dedent("""
        from . import errors
        class Gone(errors.NotFound): ...
        def later():
            class Local(ValueError): ...
            raise errors.C3Error("which kind?")
    """)
    )
    assert exception_classes(root) == {
        "c3async.ground.errors": ["C3Error", "NotFound"],
        "c3async.ground.a": ["Gone", "Local"],
    }
    assert roots_raised(root) == ["c3async.ground.a:6"]


def test_each_door_translates_our_errors_in_one_place() -> None:
    trees = _trees(PACKAGE)
    ours = {n.name for n in ast.walk(trees[ERRORS]) if isinstance(n, ast.ClassDef)}
    # The CLI: only _main catches one of ours, and _said alone reads the table.
    cli = trees["c3async.cli"]
    functions = _functions(cli)
    assert all(h in _catching(functions["_main"], ours) for h in _catching(cli, ours))
    assert [f for f, node in functions.items() if "EXIT" in _names_in(node)] == ["_said"]
    # The Hub: routes raise; _answer alone reads the table, and no route picks a status.
    app = trees["c3async.hub.app"]
    functions = _functions(app)
    assert [f for f, node in functions.items() if "STATUS" in _names_in(node)] == ["_answer"]
    routes = [f for f in functions if f.startswith("api_")]
    assert len(routes) >= 8
    for f in routes:
        assert not {"_error", "JSONResponse", "status_code"} & _names_in(functions[f]), f
        assert not _catching(functions[f], ours - {"NotRegularFile"}), f
    # The MCP server: every handler of ours goes through _answer, which alone reads the table.
    mcp = trees["c3async.serve.app"]
    functions = _functions(mcp)
    assert [f for f, node in functions.items() if "ANSWERS" in _names_in(node)] == ["_answer"]
    handlers = _catching(mcp, {"C3Error"})
    assert len(handlers) >= 3 and all("_answer" in _names_in(h) for h in handlers)


def test_no_door_reads_a_message_to_choose_an_answer() -> None:
    doors = {name: tree for name, tree in _trees(PACKAGE).items() if unit(name) == "doors"}
    for name, tree in doors.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                said = [n for n in (node.left, *node.comparators) if isinstance(n, ast.Call) and _last(n.func) == "str"]
                assert not said, f"{name}:{node.lineno} reads an error's text"


# ---------------------------------------------------------------- a project resolved once

# A path becomes a project (``paths.project_root``) and a project its state folder
# (``stateroot.project_state`` and the functions under it) only in these modules: the value
# ``ground.project.Project`` and its resolver ``resolve``, which the doors call once. Every room
# below takes the value and reads ``project.root`` and ``project.state``.
RESOLVERS = ("project_root", "project_state", "state_of", "root_state")
RESOLVING = ("ground.paths", "ground.stateroot", "ground.project")


def resolving(root: Path) -> list[str]:
    """Where a module other than RESOLVING names one of RESOLVERS: a call, an import, an attribute."""
    allowed = {f"{root.name}.{m}" for m in RESOLVING}
    out = []
    for name, tree in _trees(root).items():
        if name in allowed:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.alias):
                said = node.name
            elif isinstance(node, ast.Attribute):
                said = node.attr
            else:
                said = node.id if isinstance(node, ast.Name) else ""
            if said in RESOLVERS:
                out.append(f"{name}:{getattr(node, 'lineno', 0)} {said}")
    return out


def test_only_the_ground_resolves_a_project() -> None:
    assert resolving(PACKAGE) == []


def test_the_check_finds_a_room_that_resolves_a_project_again(tmp_path: Path) -> None:
    root = tmp_path / "c3async"
    for package in ("ground", "sessions"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "ground" / "project.py").write_text("from .paths import project_root\n")
    (root / "sessions" / "view.py").write_text(
        "from ..ground import paths, stateroot\n\n\ndef rows(p):\n    return paths.project_root(p), stateroot.project_state(p)\n"
    )
    assert resolving(root) == ["c3async.sessions.view:5 project_root", "c3async.sessions.view:5 project_state"]
