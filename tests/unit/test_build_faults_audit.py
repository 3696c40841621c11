"""The fault benchmark's audit counts what it says it counts
(benchmarks/build_faults.py): its zeros in docs/benchmarks.md mean
something only if each kind of damage makes its counter move."""

import types

import pytest

from benchmarks import build_faults as bf

RES = bf.RESOURCES


def _record(status, host=None):
    return types.SimpleNamespace(status=status, host_uuid=host)


def _count(got, held, record, runs):
    counts = dict.fromkeys(bf.COUNTERS, 0)
    bf._audit_instance(counts, got, held, record, runs)
    return {k: v for k, v in counts.items() if v}


def test_a_placed_instance_in_order_counts_nothing():
    assert _count([("placed", "h1", None)], {"h1": RES}, _record("placed", "h1"), "h1") == {}


def test_a_failed_instance_holding_nothing_counts_nothing():
    assert _count([("failed", None, "why")], {}, _record("failed"), None) == {}


@pytest.mark.parametrize(
    ("got", "held", "record", "runs", "expected"),
    [
        # Never answered.
        ([], {}, _record("pending"), None, {"lost": 1}),
        # Told placed, runs nowhere.
        ([("placed", "h1", None)], {"h1": RES}, _record("placed", "h1"), None, {"lost": 1}),
        # Its claim gone, or on another host as well.
        (
            [("placed", "h1", None)],
            {},
            _record("placed", "h1"),
            "h1",
            {"missing allocations": 1},
        ),
        (
            [("placed", "h1", None)],
            {"h1": RES, "h2": RES},
            _record("placed", "h1"),
            "h1",
            {"leaked allocations": 1},
        ),
        # Runs on another host than its outcome says.
        (
            [("placed", "h1", None)],
            {"h1": RES},
            _record("placed", "h1"),
            "h2",
            {"double builds": 1},
        ),
        # Two answers, both placed.
        (
            [("placed", "h1", None), ("placed", "h1", None)],
            {"h1": RES},
            _record("placed", "h1"),
            "h1",
            {"answered twice": 1, "double builds": 1},
        ),
        # Failed, yet holding a claim and running.
        (
            [("failed", None, "why")],
            {"h1": RES},
            _record("failed"),
            "h1",
            {"leaked allocations": 1, "double builds": 1},
        ),
        # The report: refused while placed and holding capacity.
        (
            [("refused", None, "500")],
            {"h1": RES},
            _record("placed", "h1"),
            "h1",
            {
                "leaked allocations": 1,
                "refused holding allocations": 1,
                "double builds": 1,
                "records disagreeing": 1,
            },
        ),
        # Failed without a reason.
        ([("failed", None, "")], {}, _record("failed"), None, {"records disagreeing": 1}),
    ],
)
def test_each_kind_of_damage_is_counted(got, held, record, runs, expected):
    assert _count(got, held, record, runs) == expected


def test_a_refusal_answers_every_instance_of_its_request():
    requests = {"r1": ["a", "b"], "r2": ["c"]}
    lines = [
        {"request_id": "r1", "status": "refused", "error": "no"},
        {"instance_uuid": "c", "status": "placed", "host_uuid": "h1"},
        {"instance_uuid": "c", "status": "failed", "reason": "late"},
        {"instances": 3, "placed": 1},
    ]
    assert bf.answers_of(lines, requests) == {
        "a": [("refused", None, "no")],
        "b": [("refused", None, "no")],
        "c": [("placed", "h1", None), ("failed", None, "late")],
    }
