"""Guards on the import graph (issue #30): no circle, function-local imports included; no
`_private` name crosses a module line; the first-party imports left inside functions are few,
and each says why it stays there.

These read the source (grimp and `ast`), never import it, and need no database.
`python tests/test_import_graph.py` prints what they measure: the circles, the private names,
and the function-local imports counted per reason kind (the `EXPECTED` table, ready to paste);
add `--list` to print every function-local import with its kind.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each first-party root package and the folder that holds it (platform/ is a source root).
SOURCE_ROOTS = {"cadre": ROOT / "platform", "hub": ROOT, "connectors": ROOT}
ROOT_PACKAGES = tuple(SOURCE_ROOTS)
# Tests may import anything; migrations are generated and frozen in time.
NOT_CHECKED = re.compile(r"(^|\.)(tests|conftest|migrations)(\.|$)")

# Why a first-party import may stay inside a function. The import says so on its own line, in the
# comment line(s) right above it, or above the run of imports it belongs to (`ready()`'s, one
# import a line), in a comment starting with `# lazy: <kind>`:
#   ready()              registration in AppConfig.ready(), which runs once the apps are loaded
#   optional dependency  the import needs an extra that may not be installed (an IM SDK, ...)
#   heavy                the import is slow or large (sentence-transformers, playwright, ...)
#   settings             the import needs configured Django settings
#   cycle                the import closes a cycle that cannot be avoided (name the cycle)
KINDS = ("ready()", "optional dependency", "heavy", "settings", "cycle")
REASON = re.compile(
    r"#\s*lazy:\s*(?P<kind>ready\(\)|optional dependency|heavy|settings|cycle)(?!\w)"
)
# Issue #30: "about 100 or fewer".
CEILING = 100
# The function-local first-party imports, counted per kind. A new one goes in here on purpose,
# with its kind; one made a top-level import comes out.
EXPECTED = {
    "ready()": 43,
    "optional dependency": 0,
    "heavy": 5,
    "settings": 7,
    "cycle": 0,
}
# Calls that import a module named by a string.
IMPORT_CALLS = {"import_module", "import_string", "__import__"}


@dataclass(frozen=True)
class Source:
    """One first-party module file."""

    name: str
    path: Path
    is_package: bool

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path)


@dataclass(frozen=True)
class Finding:
    """An import (or an attribute read) at one line of a module."""

    source: Source
    line: int
    text: str
    kind: str | None = None

    def __str__(self) -> str:
        return f"{self.source.where}:{self.line} ({self.source.name})  {self.text}"


def is_first_party(module: str) -> bool:
    return module.split(".")[0] in ROOT_PACKAGES


def is_private(name: str) -> bool:
    """`_name` and `__name`, not a dunder such as `__version__`."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def all_sources() -> tuple[Source, ...]:
    """Every first-party module file, tests and migrations included."""
    sources = []
    for package, folder in SOURCE_ROOTS.items():
        for path in sorted((folder / package).rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            if "node_modules" not in parts and all(part.isidentifier() for part in parts):
                sources.append(Source(".".join(parts), path, is_package))
    return tuple(sources)


@cache
def checked_sources() -> tuple[Source, ...]:
    """The first-party modules the guards check: tests, conftest and migrations left out."""
    return tuple(source for source in all_sources() if not NOT_CHECKED.search(source.name))


@cache
def module_names() -> frozenset[str]:
    names = set()
    for source in all_sources():
        parts = source.name.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(names)


@cache
def text_of(source: Source) -> str:
    return source.path.read_text(encoding="utf-8")


@cache
def parsed(source: Source) -> ast.Module:
    return ast.parse(text_of(source), filename=str(source.path))


@cache
def comments(source: Source) -> dict[int, str]:
    """The comment on each line of the module that has one."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(text_of(source)).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def imported_module(source: Source, node: ast.ImportFrom) -> str:
    """The absolute name of the module `from … import` reads from."""
    if not node.level:
        return node.module or ""
    package = source.name.split(".") if source.is_package else source.name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def statement(node: ast.stmt) -> str:
    return " ".join(ast.unparse(node).split())


@cache
def lines_of(source: Source) -> tuple[str, ...]:
    return tuple(text_of(source).splitlines())


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


@cache
def imports_of(source: Source) -> tuple[tuple[ast.Import | ast.ImportFrom, bool], ...]:
    """Every import statement of the module, each with whether it is inside a function (a walk
    of the statements only: an import is never inside an expression)."""
    found = []
    stack = [(parsed(source), False)]
    while stack:
        node, inside = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, inside))
            continue
        inside = inside or isinstance(node, FUNCTIONS)
        stack.extend(
            (child, inside) for child in ast.iter_child_nodes(node) if isinstance(child, STATEMENTS)
        )
    return tuple(sorted(found, key=lambda item: item[0].lineno))


def expressions_of(source: Source) -> Iterator[tuple[ast.AST, bool]]:
    """Every node of the module, each with whether it is inside a function; an attribute chain
    `a.b.c` comes once, as its outermost node."""
    stack = [(parsed(source), False)]
    while stack:
        node, inside = stack.pop()
        yield node, inside
        if isinstance(node, ast.Attribute):
            value = node.value
            while isinstance(value, ast.Attribute):
                value = value.value
            stack.append((value, inside))
            continue
        inside = inside or isinstance(node, FUNCTIONS)
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))


def attribute_chains(source: Source, names: set[str]) -> list[tuple[int, tuple[str, ...]]]:
    """Each `name.a.b` read in the module, for the given names, as (line, ("name", "a", "b"))."""
    # Most modules read no private attribute of an imported module: skip their walk.
    pattern = r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\.(?:\w+\.)*_"
    if not names or not re.search(pattern, text_of(source)):
        return []
    chains = []
    for node, _inside in expressions_of(source):
        if not isinstance(node, ast.Attribute):
            continue
        chain, value = [node.attr], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in names:
            chains.append((node.lineno, (value.id, *reversed(chain))))
    return sorted(chains)


@cache
def import_calls_of(source: Source) -> tuple[ast.Call, ...]:
    """The `import_module("cadre.…")`-like calls inside a function of the module."""
    if not any(f"{name}(" in text_of(source) for name in IMPORT_CALLS):
        return ()
    return tuple(
        node
        for node, inside in expressions_of(source)
        if inside and isinstance(node, ast.Call) and dynamic_import_target(node)
    )


# --- 1. no circle --------------------------------------------------------------------------


def import_graph() -> tuple[grimp.ImportGraph, dict[str, list[str]]]:
    """grimp's graph of the first-party packages (imports inside functions included, those under
    `if TYPE_CHECKING:` left out) and its adjacency over the checked modules."""
    graph = grimp.build_graph(*ROOT_PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    modules = {module for module in graph.modules if not NOT_CHECKED.search(module)}
    adjacency = {
        module: sorted(m for m in graph.find_modules_directly_imported_by(module) if m in modules)
        for module in sorted(modules)
    }
    return graph, adjacency


def circles(adjacency: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected groups of modules (Kosaraju, without recursion), largest first."""
    order, seen = [], set()
    for start in adjacency:
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(adjacency[start]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in seen:
                    seen.add(child)
                    stack.append((child, iter(adjacency[child])))
                    break
            else:
                stack.pop()
                order.append(node)
    importers = {module: [] for module in adjacency}
    for module, imported in adjacency.items():
        for target in imported:
            importers[target].append(module)
    groups, assigned = [], set()
    for start in reversed(order):
        if start in assigned:
            continue
        group, todo = [], [start]
        assigned.add(start)
        while todo:
            node = todo.pop()
            group.append(node)
            for importer in importers[node]:
                if importer not in assigned:
                    assigned.add(importer)
                    todo.append(importer)
        if len(group) > 1 or start in adjacency[start]:
            groups.append(sorted(group))
    return sorted(groups, key=lambda group: (-len(group), group))


def shortest_circle_through(start: str, group: set[str], adjacency) -> list[str]:
    """The shortest chain start → … → start inside `group` (breadth first)."""
    came_from = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in adjacency[node]:
            if target not in group:
                continue
            if target == start:
                chain = [node]
                while came_from[chain[-1]] is not None:
                    chain.append(came_from[chain[-1]])
                return [*reversed(chain), start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    return [start, start]


def describe_circles(graph, adjacency, groups: list[list[str]]) -> list[str]:
    """Each group as a few circles that together visit every module of it, one import a line:
    `importer:line  the import statement`."""
    lines = []
    for number, group in enumerate(groups, 1):
        lines.append(f"circle group {number}: {len(group)} modules: {', '.join(group)}")
        members, covered = set(group), set()
        for module in group:
            if module in covered:
                continue
            chain = shortest_circle_through(module, members, adjacency)
            covered.update(chain)
            lines.append(f"  circle of {len(chain) - 1}:")
            for importer, imported in pairwise(chain):
                details = graph.get_import_details(importer=importer, imported=imported)
                for detail in sorted(details, key=lambda d: d["line_number"]):
                    lines.append(
                        f"    {importer}:{detail['line_number']}  {detail['line_contents']}"
                    )
    return lines


def test_no_import_cycle():
    graph, adjacency = import_graph()
    assert len(adjacency) > 100, "grimp found too few first-party modules"
    groups = circles(adjacency)
    if groups:
        pytest.fail(
            f"{len(groups)} groups of modules import each other in a circle (imports inside "
            "functions included); break each by moving code to the lower floor, a port, or "
            "cadre.queues.enqueue:\n" + "\n".join(describe_circles(graph, adjacency, groups)),
            pytrace=False,
        )


# --- 2. no private name crosses a module -----------------------------------------------------


def private_names_crossing(source: Source) -> list[Finding]:
    """`from <first-party> import _name` (relative ones included), an import of a first-party
    module path with a `_private` part, and `module._name` where `module` is bound by an import
    to a first-party module."""
    modules = module_names()
    found = []
    bound = {}  # name in this module -> the first-party module it is bound to
    for node, _inside in imports_of(source):
        if isinstance(node, ast.ImportFrom):
            target = imported_module(source, node)
            if not is_first_party(target):
                continue
            private = [a.name for a in node.names if is_private(a.name)]
            if private or any(is_private(part) for part in target.split(".")):
                found.append(Finding(source, node.lineno, statement(node)))
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
        else:
            for alias in node.names:
                if not is_first_party(alias.name):
                    continue
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append(Finding(source, node.lineno, statement(node)))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    bound[root] = root
    for line, (name, *chain) in attribute_chains(source, set(bound)):
        module = bound[name]
        # Walk down the submodules; the first attribute that is not a module is a module's name.
        for attribute in chain:
            if f"{module}.{attribute}" in modules:
                module = f"{module}.{attribute}"
                continue
            if is_private(attribute):
                dotted = ".".join([name, *chain])
                found.append(Finding(source, line, f"{dotted}  ({module}.{attribute})"))
            break
    return sorted(found, key=lambda finding: finding.line)


# The one declared exception, with its reason: module -> {private name it reads: why}.
FRIENDS: dict[str, dict[str, str]] = {
    "cadre.memory.selectors": {
        "cadre.memory.search._search": "the memory gate is the search engine's only caller: the "
        "engine's actorless read keeps its private name so that tests/memory/test_memory_gate.py "
        "refuses it anywhere else",
    },
}


def befriended(finding: Finding) -> bool:
    return any(f"({name})" in finding.text for name in FRIENDS.get(finding.source.name, {}))


def test_no_private_name_crosses_a_module():
    crossing = [f for source in checked_sources() for f in private_names_crossing(source)]
    found = [finding for finding in crossing if not befriended(finding)]
    used = {
        (f.source.name, name)
        for f in crossing
        for name in FRIENDS.get(f.source.name, {})
        if f"({name})" in f.text
    }
    unused = [
        f"{module} -> {name}"
        for module, names in FRIENDS.items()
        for name in names
        if (module, name) not in used
    ]
    assert not unused, f"FRIENDS entries no longer needed: {unused}"
    if found:
        pytest.fail(
            f"{len(found)} imports or reads of another module's _private name; make the name "
            "public where it belongs (no underscore, a docstring) or move it to the lower "
            "floor:\n" + "\n".join(f"  {finding}" for finding in found),
            pytrace=False,
        )


# --- 3. function-local imports are few and explained ------------------------------------------


def reason(source: Source, node: ast.AST) -> str | None:
    """The kind named by the first `# lazy: <kind> …` comment on the import's lines, in the
    comment lines right above it, or right above the run of imports (one a line) it ends; `?` for a
    `# lazy:` comment of no known kind; None if there is none."""
    notes, lines = comments(source), lines_of(source)
    imports_ending = {found.end_lineno: found for found, _inside in imports_of(source)}
    candidates, first, last = [], node.lineno, node.end_lineno or node.lineno
    candidates += [notes.get(line, "") for line in range(first, last + 1)]
    while True:
        above = first - 1
        while above >= 1 and lines[above - 1].lstrip().startswith("#"):
            candidates.append(notes.get(above, ""))
            above -= 1
        if above not in imports_ending:
            break
        first, last = imports_ending[above].lineno, above
    for comment in candidates:
        if match := REASON.match(comment):
            return match["kind"]
    return "?" if any(re.match(r"#\s*lazy\b", comment) for comment in candidates) else None


def dynamic_import_target(node: ast.Call) -> str | None:
    """The first-party module an `import_module("…")`-like call names with a literal (or the
    literal start of an f-string), else None."""
    name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
    if name not in IMPORT_CALLS or not node.args:
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        literal = argument.value
    elif (
        isinstance(argument, ast.JoinedStr)
        and argument.values
        and isinstance(argument.values[0], ast.Constant)
    ):
        literal = f"{argument.values[0].value}…"
    else:
        return None
    return literal if is_first_party(literal) and "." in literal else None


def function_local_imports(source: Source) -> list[Finding]:
    """First-party imports inside a function, including `import_module("cadre.…")`-like calls,
    each with its reason kind."""
    found = []
    for node, inside in imports_of(source):
        if not inside:
            continue
        if isinstance(node, ast.Import):
            first_party = any(is_first_party(alias.name) for alias in node.names)
        else:
            first_party = is_first_party(imported_module(source, node))
        if first_party:
            found.append(Finding(source, node.lineno, statement(node), reason(source, node)))
    for node in import_calls_of(source):
        text = f"{ast.unparse(node.func)}({dynamic_import_target(node)!r})"
        found.append(Finding(source, node.lineno, text, reason(source, node)))
    return sorted(found, key=lambda finding: finding.line)


def all_function_local_imports() -> list[Finding]:
    return [finding for source in checked_sources() for finding in function_local_imports(source)]


def test_function_local_imports_are_few_and_explained():
    found = all_function_local_imports()
    unexplained = [finding for finding in found if finding.kind not in KINDS]
    measured = Counter(finding.kind for finding in found if finding.kind in KINDS)
    problems = []
    if unexplained:
        problems.append(
            f"{len(unexplained)} first-party imports inside a function without a reason: move "
            "each to the top of its file, or say why it stays, on its line or the line above: "
            f"`# lazy: <kind> …` with a kind of {', '.join(KINDS)}:"
        )
        problems += [
            f"  {finding}" + ("  (a `# lazy:` of no known kind)" if finding.kind == "?" else "")
            for finding in unexplained
        ]
    if len(found) > CEILING:
        problems.append(f"{len(found)} first-party imports inside functions, over {CEILING}.")
    changed = [kind for kind in KINDS if measured[kind] != EXPECTED.get(kind, 0)]
    if changed or set(EXPECTED) - set(KINDS):
        problems.append(
            "the function-local imports per kind changed: update EXPECTED in "
            f"tests/test_import_graph.py on purpose, to {dict_literal(measured)}"
        )
        for kind in changed:
            problems.append(f"  {kind}: expected {EXPECTED.get(kind, 0)}, found {measured[kind]}:")
            problems += [f"    {finding}" for finding in found if finding.kind == kind]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def dict_literal(counts: Counter) -> str:
    return "{" + ", ".join(f"{kind!r}: {counts[kind]}" for kind in KINDS) + "}"


# --- the guards see what they guard ----------------------------------------------------------

SAMPLE = """
import os

import cadre.ports as kernel_ports
from cadre import ports
from cadre.ports import Registry, __all__
from .sibling import _helper


def ready():
    # lazy: ready(): the ports are filled once the apps are loaded
    from cadre.errors import First
    from cadre.errors import Second

    return ports._private, kernel_ports.Registry, os._exit, Registry


def run(name):
    from cadre.errors import Third  # lazy: cycle (cadre.a -> cadre.b -> cadre.a)
    from cadre.errors import Fourth
    import json

    importlib.import_module(f"connectors.{name}.transport")  # lazy: optional dependency
    return kernel_ports._hidden.value, json


def view():
    # lazy: because
    from hub import models
"""


def test_the_guards_see_what_they_guard(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    source = Source("cadre.sample.module", path, is_package=False)
    private = [(finding.line, finding.text) for finding in private_names_crossing(source)]
    assert private == [
        (7, "from .sibling import _helper"),
        (15, "ports._private  (cadre.ports._private)"),
        (24, "kernel_ports._hidden.value  (cadre.ports._hidden)"),
    ]
    local = [(finding.line, finding.kind) for finding in function_local_imports(source)]
    assert local == [
        (12, "ready()"),
        (13, "ready()"),
        (19, "cycle"),
        (20, None),
        (23, "optional dependency"),
        (29, "?"),
    ]
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"]}
    assert circles(graph) == [["a", "b", "c"], ["e"]]
    assert shortest_circle_through("b", {"a", "b", "c"}, graph) == ["b", "c", "a", "b"]


def report(list_all: bool) -> None:
    graph, adjacency = import_graph()
    groups = circles(adjacency)
    print(f"== circles: {len(groups)} groups, {sum(map(len, groups))} modules")
    print("\n".join(describe_circles(graph, adjacency, groups)))
    private = [f for source in checked_sources() for f in private_names_crossing(source)]
    print(f"== private names crossing a module: {len(private)}")
    print("\n".join(f"  {finding}" for finding in private))
    found = all_function_local_imports()
    measured = Counter(finding.kind for finding in found)
    unexplained = [finding for finding in found if finding.kind not in KINDS]
    print(f"== first-party imports inside functions: {len(found)} (ceiling {CEILING})")
    print(f"  EXPECTED = {dict_literal(measured)}")
    print(f"  without a reason: {len(unexplained)}")
    for finding in found if list_all else unexplained:
        print(f"  [{finding.kind or 'no reason'}] {finding}")


if __name__ == "__main__":
    # grimp finds the packages on sys.path, as pytest's `pythonpath` puts them.
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    report(list_all="--list" in sys.argv[1:])
