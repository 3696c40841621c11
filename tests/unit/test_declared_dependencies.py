"""Every third-party import of the shipped packages is a declared dependency.

The test extra installs a great deal (clients, gabbi, testcontainers...) that
brings packages of its own; a product module that imports one of those runs
in the test virtualenv and fails on a machine that installed the package
alone (it happened: placement/server.py imported h11, which only the test
extra brought). So the check is against ``install_requires`` itself, not
against what happens to be importable: each top-level module a shipped
package imports must belong to a distribution named there. A module that is
only installed by some other dependency (transitively) counts as undeclared
too: that dependency may drop it in any release.

Imports inside ``try: ... except ImportError`` are optional by construction
and are listed separately: they must really be optional (the module works
without them), so they are named in OPTIONAL with the reason.
"""

import ast
import configparser
import importlib.metadata
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _shipped():
    """The top-level packages setup.cfg ships ([options.packages.find] include),
    read from setup.cfg itself: a hand-kept list missed node_agent when it was
    added, and its imports went unchecked."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    names = cfg["options.packages.find"]["include"].split()
    return tuple(sorted({name.split(".")[0] for name in names}))


SHIPPED = _shipped()

# Imports that are guarded by ``except ImportError`` on purpose.
OPTIONAL = {
    # node_agent/discovery.py: NVIDIA GPUs through NVML (nvidia-ml-py, the gpu
    # extra); a node without it reports no GPU and says why.
    "pynvml",
}


def _normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(section="install_requires"):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    names = set()
    for line in cfg["options"][section].splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(_normalise(re.match(r"[A-Za-z0-9._-]+", line).group(0)))
    return names


def _guarded(tree):
    """The Import nodes that sit in a try whose handlers catch ImportError."""
    guarded = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught.update(t.id for t in types if isinstance(t, ast.Name))
        if caught & {"ImportError", "ModuleNotFoundError"}:
            for stmt in node.body:
                guarded.update(id(n) for n in ast.walk(stmt))
    return guarded


def third_party_imports():
    """{top-level module: {(file, guarded)}} over every shipped module."""
    found = {}
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            guarded = _guarded(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top in sys.stdlib_module_names or top in SHIPPED:
                        continue
                    rel = str(path.relative_to(ROOT))
                    found.setdefault(top, set()).add((rel, id(node) in guarded))
    return found


def test_every_shipped_import_is_declared_in_install_requires():
    declared = _declared()
    providers = importlib.metadata.packages_distributions()
    problems = []
    for module, sites in sorted(third_party_imports().items()):
        where = sorted(rel for rel, _ in sites)
        if all(is_guarded for _, is_guarded in sites) and module in OPTIONAL:
            continue
        dists = providers.get(module)
        if not dists:
            problems.append(
                f"{module} (imported by {where[0]}) is provided by no installed distribution"
            )
            continue
        if not {_normalise(d) for d in dists} & declared:
            problems.append(
                f"{module} (imported by {', '.join(where)}) belongs to {'/'.join(dists)}, "
                "which install_requires in setup.cfg does not declare"
            )
    assert not problems, "undeclared dependencies:\n" + "\n".join(problems)


def test_optional_imports_are_guarded_everywhere():
    # An OPTIONAL module imported without a guard somewhere is a hard
    # dependency after all.
    for module, sites in third_party_imports().items():
        if module in OPTIONAL:
            unguarded = sorted(rel for rel, is_guarded in sites if not is_guarded)
            assert not unguarded, f"{module} is optional but imported unguarded in {unguarded}"


def test_every_shipped_package_is_checked():
    assert {"node_agent", "placement", "powerpolicy", "migrations"} <= set(SHIPPED)
    for package in SHIPPED:
        assert (ROOT / package / "__init__.py").is_file(), package


def test_the_checker_sees_an_undeclared_import(tmp_path, monkeypatch):
    # The check itself can fail: a shipped module importing a package that
    # is installed here (by the test extra) but not declared is reported.
    package = tmp_path / "placement"
    package.mkdir()
    (package / "uses_gabbi.py").write_text("import gabbi\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    flask>=3.0\n")
    try:
        test_every_shipped_import_is_declared_in_install_requires()
    except AssertionError as exc:
        assert "gabbi (imported by placement/uses_gabbi.py)" in str(exc)
    else:
        raise AssertionError("an undeclared import went unnoticed")
