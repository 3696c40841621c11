"""The one pipeline: its stages in order, and a filter's answer said as such.

A single request and a batch run through ``pipeline.run``; a filter answers
fits / does not fit (with a reason) / an error, and a plugin that raises is
reported as failing, never as "no host fits".
"""

import ast
import inspect
import random

import pytest

from scheduler import filters as filters_mod
from scheduler import pipeline
from scheduler import worker
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host
from tests.unit.scheduler.single_request_cases import spec


def test_the_stages_are_called_in_order_in_one_function():
    tree = ast.parse(inspect.getsource(pipeline.run))
    calls = [
        ast.unparse(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) != "set"
    ]
    assert calls == ["source.open", "plan", "reserve", "alternates"]
    # And the module's documentation lists the seven, in that order.
    doc = pipeline.__doc__
    stages = [
        "walk the candidates",
        "filter",
        "score and normalise",
        "pick",
        "reserve",
        "alternates",
        "unreserve",
    ]
    positions = [doc.index(stage) for stage in stages]
    assert positions == sorted(positions)


def test_a_single_request_and_a_batch_both_run_through_the_pipeline(monkeypatch):
    runs = []
    real = pipeline.run

    def spy(sched, members, source, alone=False):
        runs.append((len(members), alone))
        return real(sched, members, source, alone)

    monkeypatch.setattr(pipeline, "run", spy)
    fake = FakePlacement([host(f"h{i}") for i in range(4)])
    sched = worker.Scheduler(make_conf(), fake, rng=random.Random(1))
    sched.select_destinations(spec("one"))
    outcomes = sched.select_batch(
        [worker.spec_mod.load_request_spec(spec(f"b{i}")) for i in range(3)]
    )
    assert [kind for kind, _v in outcomes] == [pipeline.PLACED] * 3
    assert runs == [(1, True), (3, False)]


class _Broken:
    name = "BrokenFilter"
    reason = "never shown: it fails"

    def node_fields(self, spec):
        return set()

    def host_passes(self, host, spec):
        if host.name == "h1":
            raise KeyError("rack")
        return True


class _Picky:
    name = "PickyFilter"
    reason = "the class's reason"

    def node_fields(self, spec):
        return set()

    def host_passes(self, host, spec):
        if host.name == "h0":
            return filters_mod.Verdict(False, "h0 is kept for the night shift")
        return filters_mod.Verdict(True)


def _with_filters(hosts, *extra):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(), fake, rng=random.Random(1))
    sched.filters = [*sched.filters, *extra]
    return fake, sched


def test_a_filter_that_raises_is_reported_as_failing_not_as_no_host_fits():
    fake, sched = _with_filters([host("h1")], _Broken())
    with pytest.raises(worker.NoValidHost) as caught:
        sched.select_destinations(spec("broken"))
    text = str(caught.value)
    assert "BrokenFilter failed on 1 host(s) (KeyError: 'rack')" in text
    assert "never shown" not in text
    record = fake.reports["broken"]["filters"][-1]
    assert record["name"] == "BrokenFilter" and record["errors"] == 1
    assert record["error"] == "KeyError: 'rack'"


def test_a_filter_that_raises_for_one_host_still_judges_the_others():
    fake, sched = _with_filters([host("h0"), host("h1"), host("h2")], _Broken())
    [[sel, *_alts]] = sched.select_destinations(spec("some"))
    assert sel.host_name in ("h0", "h2")
    record = fake.reports["some"]["filters"][-1]
    assert (record["before"], record["after"], record["errors"]) == (3, 2, 1)


def test_a_verdicts_reason_is_the_records_reason():
    fake, sched = _with_filters([host("h0")], _Picky())
    with pytest.raises(
        worker.NoValidHost, match="PickyFilter removed 1 \\(h0 is kept for the night shift\\)"
    ):
        sched.select_destinations(spec("picky"))
    fake, sched = _with_filters([host("h0"), host("h1")], _Picky())
    [[sel, *_alts]] = sched.select_destinations(spec("picky2"))
    assert sel.host_name == "h1"
