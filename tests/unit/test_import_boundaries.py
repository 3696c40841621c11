"""The services meet only in ``joule/`` and over REST: enforced on every import.

Every module of the shipped packages is parsed (not imported, so an import
hidden in a function body counts as much as one at the top) and each import
of a first-party package is checked against what its package may use.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# package -> the first-party packages its modules may import (besides itself).
ALLOWED = {
    "joule": set(),
    # migrations/ is placement's alembic environment (its schema history).
    "placement": {"joule", "migrations"},
    "scheduler": {"joule"},
    # The conductor embeds the scheduler in its process.
    "conductor": {"joule", "scheduler"},
    "powerpolicy": {"joule"},
    # The node agent talks to placement over REST only (joule.placement_client).
    "node_agent": {"joule"},
    # The whole-system demo is a composition root: it may use anything.
    "placement_demo": {"joule", "placement", "scheduler", "conductor", "powerpolicy"},
    # The energy simulator composes the same services on a simulated clock.
    "simulator": {"joule", "placement", "scheduler", "conductor", "powerpolicy"},
    "migrations": {"placement"},
}
FIRST_PARTY = set(ALLOWED)


def imported_packages(source, module_package):
    """The first-party top-level packages ``source`` imports, with line numbers."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # A relative import stays inside the module's own package.
            names = [module_package if node.level else node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if top in FIRST_PARTY:
                found.append((top, node.lineno))
    return found


def violations(path, package):
    out = []
    for top, line in imported_packages(path.read_text(encoding="utf-8"), package):
        if top != package and top not in ALLOWED[package]:
            out.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    return out


def _modules():
    for package in sorted(ALLOWED):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield pytest.param(path, package, id=str(path.relative_to(ROOT)))


@pytest.mark.parametrize(("path", "package"), list(_modules()))
def test_module_imports_only_what_its_package_may(path, package):
    assert violations(path, package) == []


def test_every_package_is_checked():
    # Tests, benchmarks and tools drive the services from outside: they may
    # import anything.
    shipped = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks", "tools"}
    assert shipped <= FIRST_PARTY, f"add {sorted(shipped - FIRST_PARTY)} to ALLOWED"


def test_checker_sees_imports_in_any_form(tmp_path):
    # The checker itself must not miss the forms a violation can take.
    bad = tmp_path / "mod.py"
    bad.write_text(
        "import powerpolicy.families\n"
        "from scheduler import client\n"
        "def f():\n"
        "    from conductor.manager import Conductor\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    found = imported_packages(bad.read_text(encoding="utf-8"), "placement")
    assert sorted(found, key=lambda f: f[1]) == [
        ("powerpolicy", 1),
        ("scheduler", 2),
        ("conductor", 4),
        ("placement", 5),
    ]
