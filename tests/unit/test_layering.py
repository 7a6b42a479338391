"""The house's rooms: every import (deferred ones too) points down the order of docs/design.md,
and no module of the project imports itself back through others."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# From the ground up; a module may import its own room and the rooms below it, never above.
ROOMS: list[tuple[str, ...]] = [
    (
        "pipeline.errors",
        "pipeline.escape",
        "pipeline.progress",
        "pipeline.urls",
        "pipeline.children",
        "pipeline.exiting",
    ),
    ("pipeline.config", "pipeline.settings_doc", "pipeline.language_table"),
    ("pipeline.games",),
    ("pipeline.store",),
    ("pipeline.data",),
    ("pipeline.jobs",),
    ("pipeline.grading",),
    ("pipeline.hacking",),
    ("pipeline.judging",),
    ("pipeline.packages",),
    ("workers",),
    ("pipeline.local",),
    ("pipeline.app",),
    ("pipeline.client",),
    ("pipeline.server",),
    ("pipeline.cli",),
    ("pipeline.launch",),
]
PACKAGES = ("pipeline", "workers", "benchmarks")


def modules() -> dict[str, Path]:
    """Every module of the project's packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules that `name` imports, wherever in it the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            module = target
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
    return found


def room(name: str) -> int | None:
    """The floor of a module's room (None: a package face or outside the rooms)."""
    for floor, members in enumerate(ROOMS):
        if any(name == member or name.startswith(member + ".") for member in members):
            return floor
    return None


GRAPH = {name: imports(name, path, set(modules())) for name, path in modules().items()}


def test_every_module_of_pipeline_and_workers_has_a_room() -> None:
    homeless = [
        name
        for name in GRAPH
        if name not in ("pipeline", "workers") and not name.startswith("benchmarks")
        if room(name) is None
    ]
    assert homeless == []


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points to a room above its own."""
    return [
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in sorted(targets)
        if (here := room(name)) is not None and (there := room(target)) is not None and there > here
    ]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_every_import_points_down() -> None:
    assert upward(GRAPH) == []


def test_no_import_circles_benchmarks_included() -> None:
    assert circles(GRAPH) == []


def test_the_root_holds_few_modules_and_each_room_says_what_it_owns() -> None:
    root = sorted(path.name for path in (ROOT / "pipeline").glob("*.py"))
    assert len(root) <= 14, root
    faces = [path for path in (ROOT / "pipeline").glob("*/__init__.py")]
    assert len(faces) >= 5
    for face in faces:
        docstring = ast.get_docstring(ast.parse(face.read_text()))
        assert docstring and "Imports" in docstring, face


def test_the_checks_see_a_planted_upward_import_and_circle() -> None:
    planted = {name: set(targets) for name, targets in GRAPH.items()}
    planted["pipeline.games.problem"].add("pipeline.grading.rules")
    planted["pipeline.store.keys"].add("pipeline.data.producer")
    assert upward(planted) == [
        "pipeline.games.problem -> pipeline.grading.rules",
        "pipeline.store.keys -> pipeline.data.producer",
    ]
    planted["benchmarks.gate"].add("benchmarks.gate_helper")
    planted["benchmarks.gate_helper"] = {"benchmarks.gate"}
    assert circles(planted) == [["benchmarks.gate", "benchmarks.gate_helper"]]


def room_name(floor: int) -> str:
    """A room as package docstrings name it: `ground`, `config`, or its package's name."""
    return "ground" if floor == 0 else ROOMS[floor][0].rpartition(".")[2]


def rooms_imported(package: str, graph: dict[str, set[str]]) -> set[str]:
    """The rooms that a package's modules import, besides its own."""
    own = room(package)
    return {
        room_name(there)
        for name, targets in graph.items()
        if name == package or name.startswith(package + ".")
        for target in targets
        if (there := room(target)) is not None and there != own
    }


def said_imports(face: Path) -> set[str]:
    """The rooms a package docstring's `Imports:` line names."""
    docstring = ast.get_docstring(ast.parse(face.read_text())) or ""
    found = [part for part in docstring.split("\n\n") if part.startswith("Imports:")]
    assert len(found) == 1, f"{face}: one paragraph 'Imports: room, room, ...'"
    listed = found[0].removeprefix("Imports:").replace("\n", " ").split(",")
    return {word.strip(" .") for word in listed if word.strip(" .")}


def test_each_package_docstring_names_the_rooms_it_imports() -> None:
    wrong = {}
    for face in sorted((ROOT / "pipeline").glob("*/__init__.py")):
        package = f"pipeline.{face.parent.name}"
        said, real = said_imports(face), rooms_imported(package, GRAPH)
        if said != real:
            wrong[package] = {"said": sorted(said), "imports": sorted(real)}
    assert wrong == {}


def test_the_docstring_check_sees_a_room_not_named() -> None:
    planted = {name: set(targets) for name, targets in GRAPH.items()}
    planted["pipeline.games.problem"].add("pipeline.store.keys")
    assert "store" in rooms_imported("pipeline.games", planted)
    assert "store" not in said_imports(ROOT / "pipeline" / "games" / "__init__.py")
