"""NODE_SELECTOR: Kubernetes' label selector forms, and the refusal of anything else."""

import os
import shutil
import subprocess

import pytest

from powerpolicy import selector as selector_mod
from powerpolicy.selector import Selector
from powerpolicy.selector import SelectorError

WORKER = {"role": "worker", "zone": "z1", "joulie.io/managed": "true"}
INFRA = {"role": "infra", "zone": "z2"}
BARE = {}


@pytest.mark.parametrize(
    "text, worker, infra, bare",
    [
        ("", True, True, True),
        ("role", True, True, False),
        ("!role", False, False, True),
        ("role=worker", True, False, False),
        ("role==worker", True, False, False),
        ("role = worker", True, False, False),
        ("role!=worker", False, True, True),  # absent counts as "not worker", as in Kubernetes
        ("role in (worker)", True, False, False),
        ("role in(worker,infra)", True, True, False),
        ("role notin (worker)", False, True, True),
        ("role notin (worker, infra)", False, False, True),
        ("joulie.io/managed=true", True, False, False),
        ("role in (worker,infra), zone notin (z2)", True, False, False),
        ("role, !joulie.io/managed", False, True, False),
        ("zone=z1,role", True, False, False),
    ],
)
def test_forms_select_what_kubernetes_selects(text, worker, infra, bare):
    sel = Selector(text)
    assert (sel.matches(WORKER), sel.matches(INFRA), sel.matches(BARE)) == (worker, infra, bare)


def test_empty_value_matches_an_empty_label_only():
    sel = Selector("gpu=")
    assert sel.matches({"gpu": ""})
    assert not sel.matches({"gpu": "a100"}) and not sel.matches({})


def test_parsed_requirements():
    sel = Selector("a, !b, c==1, d!=2, e in (x,y), f notin (z)")
    assert [(r.key, r.op, sorted(r.values)) for r in sel.requirements] == [
        ("a", selector_mod.EXISTS, []),
        ("b", selector_mod.NOT_EXISTS, []),
        ("c", selector_mod.EQUALS, ["1"]),
        ("d", selector_mod.NOT_EQUALS, ["2"]),
        ("e", selector_mod.IN, ["x", "y"]),
        ("f", selector_mod.NOT_IN, ["z"]),
    ]
    assert str(sel) == "a,!b,c=1,d!=2,e in (x,y),f notin (z)"


@pytest.mark.parametrize(
    "text, message",
    [
        ("role in worker", "expected '(' after 'in' at position 8"),
        ("role in (worker", "expected ',' or ')' in the values of 'in'"),
        ("role in ()", "'in' needs at least one value"),
        ("role notin ()", "'notin' needs at least one value"),
        ("role in (a b)", "expected ',' or ')'"),
        ("=x", "expected a label key, found '='"),
        ("a,", "expected a label key, found 'the end'"),
        (",a", "expected a label key, found ','"),
        ("a,,b", "expected a label key, found ','"),
        ("cpu>4", "the numeric comparison '>' is not supported"),
        ("cpu<4", "the numeric comparison '<' is not supported"),
        ("role=(a,b)", "'=' takes one value; use 'in (...)'"),
        ("role worker", "expected an operator (=, ==, !=, in, notin) or ',' after 'role'"),
        ("role=a b", "expected ',' or the end, found 'b'"),
        ("k=v=w", "expected ',' or the end, found '='"),
        ("!k=v", "expected ',' or the end, found '='"),
        ("k=-v", "invalid label value '-v'"),
        ("k=" + "v" * 64, "invalid label value"),
        ("-k", "invalid label key '-k'"),
        ("k" * 64, "invalid label key"),
        ("Example.com/k", "invalid label key prefix 'Example.com'"),
        ("/k", "label key '/k' has an empty prefix"),
        ("a/b/c", "invalid label key prefix 'a/b'"),
    ],
)
def test_syntax_errors_and_unsupported_forms_are_refused(text, message):
    with pytest.raises(SelectorError) as info:
        Selector(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert repr(text) in str(info.value)


def _power_controller(*args, env=None):
    """The console script, as an operator runs it."""
    exe = shutil.which("power-controller") or pytest.fail("power-controller is not installed")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OS_POWER__")}
    environ.update(env or {})
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=60, env=environ, check=False
    )


@pytest.mark.parametrize("mode", [["--once"], ["--dry-run"], []])
def test_the_service_refuses_to_start_with_one_line(mode, tmp_path):
    conf = tmp_path / "power.conf"
    conf.write_text(
        "[power]\nnode_selector = role in worker\n"
        # Unreachable: the controller must stop before any request.
        "[placement]\nendpoint_override = http://127.0.0.1:9\n"
    )
    proc = _power_controller("--config-file", str(conf), *mode)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "power-controller: error: bad configuration: node_selector "
        "'role in worker': expected '(' after 'in' at position 8"
    ]
    assert proc.stdout == ""


def test_environment_selector_is_checked_too():
    proc = _power_controller(
        "--once",
        env={
            "OS_POWER__NODE_SELECTOR": "cpu>4",
            "OS_PLACEMENT__ENDPOINT_OVERRIDE": "http://127.0.0.1:9",
        },
    )
    assert proc.returncode == 2
    assert "the numeric comparison '>' is not supported" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
