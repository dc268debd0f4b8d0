"""No import cycles, between modules or between rooms, counting imports made inside functions.

import-linter sees the same graph for its contracts; this test adds the cycle check itself and
reads every `import` statement wherever it stands (module level, inside a function, under
`if TYPE_CHECKING:`), because an import moved into a function still ties the two modules together.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Folders that are not part of the application's import graph.
NOT_ROOMS = {"tests", "benchmarks", "docs", "data", "build", "dist"}


def _rooms() -> list[str]:
    return sorted(
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_ROOMS and not path.parent.name.startswith(".")
    )


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Dotted name → file of every module of the application (migrations included)."""
    modules = {}
    for room in _rooms():
        for path in sorted((ROOT / room).rglob("*.py")):
            modules[_module_name(path)] = path
    entry = ROOT / "streamlit_app.py"
    if entry.exists():
        modules["streamlit_app"] = entry
    return modules


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imported(tree: ast.AST, name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules a module imports, resolved to the most specific module that exists."""
    targets: set[str] = set()
    package = _package_of(name, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(part for part in [*base_parts, node.module or ""] if part)
            else:
                base = node.module or ""
            # `from a import b` imports the module a.b when there is one, else a name from a.
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {
        name: _imported(ast.parse(path.read_text(encoding="utf-8"), str(path)), name, path, known)
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # Iterative depth-first search: (node, iterator over its successors).
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def page_modules() -> set[str]:
    """Page modules that stand inside a lower room's folder (the analysis pages), as the import contract
    "page rooms do not import each other" names them: each is a page room of its own, above ui/."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    pages = next(c for c in contracts["contracts"] if c["name"] == "page rooms do not import each other")
    return {module for module in pages["modules"] if "." in module}


def room_graph(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The module graph collapsed to packages named by their first `depth` parts (a page module is its own)."""
    pages = page_modules()

    def room(name: str) -> str:
        page = next((page for page in pages if name == page or name.startswith(f"{page}.")), None)
        return page or ".".join(name.split(".")[:depth])

    collapsed: dict[str, set[str]] = {}
    for source, targets in graph.items():
        edges = collapsed.setdefault(room(source), set())
        edges.update(room(target) for target in targets if room(target) != room(source))
    return collapsed


def test_the_checker_finds_a_cycle_hidden_inside_a_function(tmp_path):
    first = ast.parse("def later():\n    from pkg import second\n")
    second = ast.parse("import pkg.first\n")
    known = {"pkg", "pkg.first", "pkg.second"}
    graph = {
        "pkg.first": _imported(first, "pkg.first", tmp_path / "pkg" / "first.py", known),
        "pkg.second": _imported(second, "pkg.second", tmp_path / "pkg" / "second.py", known),
    }
    assert graph == {"pkg.first": {"pkg.second"}, "pkg.second": {"pkg.first"}}
    assert cycles(graph) == [["pkg.first", "pkg.second"]]
    relative = ast.parse("from . import second\nfrom .second import thing\n")
    assert _imported(relative, "pkg.first", tmp_path / "pkg" / "first.py", known) == {"pkg.second"}


def test_the_application_has_modules_to_check():
    graph = import_graph()
    assert {"db", "analysis"} <= {name.split(".")[0] for name in graph}
    assert sum(len(targets) for targets in graph.values()) > 50


def test_no_module_level_cycle():
    assert cycles(import_graph()) == []


def test_no_cycle_between_rooms_or_their_subpackages():
    graph = import_graph()
    assert cycles(room_graph(graph, 1)) == []
    assert cycles(room_graph(graph, 2)) == []


def room_of(module: str) -> str:
    """A module's room: its top package, and inside db/ the room below it (db.work, db.store, …)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "db" and len(parts) > 1 else parts[0]


def private_names_across_rooms(tree: ast.AST, name: str, known: set[str]) -> list[str]:
    """`from other_room.x import _name`, and `module._name` on a module bound from another room."""
    found: list[str] = []
    foreign_modules: set[str] = set()  # local names bound to a module of another room
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in known and room_of(full) != room_of(name):
                    foreign_modules.add(alias.asname or alias.name)
                elif (
                    node.module in known
                    and room_of(node.module) != room_of(name)
                    and alias.name.startswith("_")
                    and not alias.name.startswith("__")
                ):
                    found.append(f"{name} imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in known and room_of(alias.name) != room_of(name):
                    foreign_modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in foreign_modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{name} reads {node.value.id}.{node.attr}")
    return sorted(set(found))


def test_the_private_name_check_sees_both_forms():
    known = {"db", "db.work", "db.work.assignments", "db.store", "db.store.models"}
    source = ast.parse(
        "from db.store.models import _hidden, Case\nfrom db.store import models\nmodels._rows()\nmodels.Case\n"
    )
    assert private_names_across_rooms(source, "db.work.assignments", known) == [
        "db.work.assignments imports db.store.models._hidden",
        "db.work.assignments reads models._rows",
    ]
    same_room = ast.parse("from db.work.assignments import _helper\n")
    assert private_names_across_rooms(same_room, "db.work.feedback", known | {"db.work.feedback"}) == []


def test_no_private_name_crosses_a_room():
    modules = project_modules()
    known = set(modules)
    crossings = [
        crossing
        for name, path in modules.items()
        for crossing in private_names_across_rooms(ast.parse(path.read_text(encoding="utf-8")), name, known)
    ]
    assert crossings == []
