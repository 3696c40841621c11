"""A request that arrives while placement's database is down is recorded
once it is back, not refused (issue 23's PostgreSQL fault run: a 15 s
restart refused 43 of 2,000 requests for good)."""

import pytest

from conductor import records as records_mod
from conductor import super_conductor as super_mod
from joule import placement_client as client_mod
from joule import request_spec as spec_mod

UNAVAILABLE = client_mod.ServerError(
    "POST", "/build_requests", 503, "placement.database.unavailable", "retry later"
)


class _Records:
    def __init__(self, failures):
        self.failures = list(failures)
        self.creates = 0

    def create_held(self, items):
        self.creates += 1
        if self.failures:
            raise self.failures.pop(0)
        return {i["instance_uuid"]: 0 for i in items}


class _Batchers:
    scheduling = None
    build_casts = None


class _Reporter:
    def __init__(self):
        self.refused = []

    def request_refused(self, reply_topic, request_id, reason):
        self.refused.append(reason)


def _conductor(records, seconds, monkeypatch):
    monkeypatch.setattr(super_mod, "RECORD_RETRY_BASE", 0.01)
    monkeypatch.setattr(super_mod, "RECORD_RETRY_MAX", 0.02)
    reporter = _Reporter()
    sc = super_mod.SuperConductor(
        records, None, None, reporter, None, _Batchers(), record_retry_seconds=seconds
    )
    scheduled = []
    sc.schedule_and_dispatch = lambda spec, gens, topic: scheduled.append(gens)
    return sc, reporter, scheduled


def _spec():
    return spec_mod.load_request_spec(
        {
            "version": "1.0",
            "request_id": "req-1",
            "project_id": "p",
            "user_id": "u",
            "resources": {"VCPU": 1},
            "instance_uuids": ["6f1c9a52-9a0e-4d0b-9d8b-1f1f4d3c2b1a"],
        }
    )


def test_recorded_once_placement_is_back(monkeypatch):
    unreachable = client_mod.PlacementUnreachable("POST", "/build_requests", "x", "refused")
    records = _Records([UNAVAILABLE, unreachable, UNAVAILABLE])
    sc, reporter, scheduled = _conductor(records, 5.0, monkeypatch)
    sc.build_instances(_spec(), "topic")
    assert records.creates == 4 and reporter.refused == [] and len(scheduled) == 1


def test_refused_once_the_outage_outlasts_the_retry_time(monkeypatch):
    records = _Records([UNAVAILABLE] * 1000)
    sc, reporter, scheduled = _conductor(records, 0.1, monkeypatch)
    sc.build_instances(_spec(), "topic")
    assert scheduled == [] and len(reporter.refused) == 1
    assert "503" in reporter.refused[0] and 2 <= records.creates < 1000


@pytest.mark.parametrize(
    "error",
    [
        client_mod.BadRequest("POST", "/build_requests", 400, None, "bad"),
        client_mod.ServerError("POST", "/build_requests", 500, None, "boom"),
    ],
)
def test_a_refusal_is_final_at_once(monkeypatch, error):
    records = _Records([error])
    sc, reporter, scheduled = _conductor(records, 5.0, monkeypatch)
    sc.build_instances(_spec(), "topic")
    assert records.creates == 1 and len(reporter.refused) == 1 and scheduled == []


def test_a_duplicate_is_dropped_not_retried(monkeypatch):
    records = _Records([records_mod.AlreadyRecorded("req-1")])
    sc, reporter, scheduled = _conductor(records, 5.0, monkeypatch)
    sc.build_instances(_spec(), "topic")
    assert records.creates == 1 and reporter.refused == [] and scheduled == []
