"""The shape of the scheduler, the conductor and the power controller, kept.

Parsed, not imported (as the import-boundary test does): every function is
short enough to read in one screen, no module of these packages reaches
into another module's private names, the scheduler's modules import each
other without a circle, and the claim-with-retry (the one place that
knows placement's "concurrent update" code) exists once.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("scheduler", "conductor", "powerpolicy")
# About one screen: a function longer than this does more than one step.
MAX_FUNCTION_LINES = 60


def _sources(packages=PACKAGES):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def long_functions(tree, limit=MAX_FUNCTION_LINES):
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > limit
    ]


def _own_private_names(tree):
    """Private names this module defines: functions, classes, attributes
    set on ``self``/``cls``, module and class level assignments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # __slots__ entries and the like.
            if node.value.startswith("_") and node.value.isidentifier():
                names.add(node.value)
    return {n for n in names if n.startswith("_")}


def foreign_private_uses(tree):
    """``x._name`` (x not self/cls) and ``from m import _name`` where
    ``_name`` is not this module's own."""
    own = _own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((f"from {node.module} import {alias.name}", node.lineno))
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if not name.startswith("_") or name.startswith("__"):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if name in own:
                continue
            found.append((ast.unparse(node), node.lineno))
    return found


def import_graph(package):
    """{module: {first-party modules of ``package`` it imports}}, imports in
    function bodies included."""
    graph = {}
    for path, tree in _sources((package,)):
        name = _module_name(path)
        edges = graph.setdefault(name, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == package:
                    edges.add(target)
    modules = set(graph)
    # ``from scheduler import worker`` names a module; ``from scheduler.x
    # import y`` names a function of one: keep the modules only.
    return {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}


def cycles(graph):
    found = []
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def _params(packages=PACKAGES):
    return [
        pytest.param(path, tree, id=str(path.relative_to(ROOT)))
        for path, tree in _sources(packages)
    ]


@pytest.mark.parametrize(("path", "tree"), _params())
def test_functions_fit_on_a_screen(path, tree):
    assert long_functions(tree) == []


@pytest.mark.parametrize(("path", "tree"), _params())
def test_no_module_uses_another_modules_private_names(path, tree):
    assert foreign_private_uses(tree) == []


def test_scheduler_modules_import_each_other_without_a_circle():
    assert cycles(import_graph("scheduler")) == []


def test_placements_concurrent_update_code_is_handled_in_one_module():
    # The claim-with-retry (jittered retries on a provider generation
    # conflict placement gave up on) lives in one place.
    users = [
        _module_name(path)
        for path, tree in _sources(("scheduler",))
        if any(
            isinstance(node, ast.Constant) and node.value == "placement.concurrent_update"
            for node in ast.walk(tree)
        )
    ]
    assert users == ["scheduler.claim"]


def test_the_checks_see_what_they_look_for():
    tree = ast.parse(
        "from scheduler import worker as w\n"
        "from scheduler.x import _hidden\n"
        "class A:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "    def f(self, other):\n"
        "        return other._mine + w._theirs + self._mine\n"
        "def g():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES) + "    return x\n"
    )
    assert [use for use, _line in foreign_private_uses(tree)] == [
        "from scheduler.x import _hidden",
        "w._theirs",
    ]
    assert [name for name, _l, _n in long_functions(tree)] == ["g"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
