"""What one bus message may carry: the limits of the wire contract
(docs/architecture.md, "The request spec"). A spec over a limit is answered
``invalid`` naming the field and the limit; a message over one (or with a
reply topic that is not a topic) is refused whole, logged once, and never
raises into the executor thread or breaks the other messages' shared flush."""

import logging

import pytest

from conductor import conf as cconf
from conductor import driver as driver_mod
from conductor import service as cservice
from conductor import super_conductor
from joule import request_spec as rs
from joule import rpc
from scheduler import service as sched_service

INST = "9e1c1f52-5b55-4b2a-8f35-7d9f4e5a1b11"
AGG = "11111111-2222-3333-4444-555555555555"


def _spec(**kw):
    spec = {"version": "1.2", "project_id": "p", "user_id": "u", "resources": {"VCPU": 1}}
    spec.update(kw)
    return spec


N = rs.MAX_SPEC_LIST
OVER = {
    "required": _spec(required=[f"CUSTOM_T{i}" for i in range(N + 1)]),
    "forbidden": _spec(forbidden=[f"CUSTOM_T{i}" for i in range(N + 1)]),
    "member_of": _spec(member_of=[AGG] * (N + 1)),
    "member_of.0": _spec(member_of=[[AGG] * (N + 1)]),
    "groups": _spec(
        groups={f"_{i}": {"resources": {"VCPU": 1}} for i in range(N + 1)}, group_policy="none"
    ),
    "groups._1.required": _spec(
        groups={"_1": {"resources": {"VCPU": 1}, "required": [f"T{i}" for i in range(N + 1)]}}
    ),
    "node_selector": _spec(node_selector={f"l{i}": "v" for i in range(N + 1)}),
    "scheduler_hints.force_hosts": _spec(
        scheduler_hints={"force_hosts": [f"h{i}" for i in range(N + 1)]}
    ),
    "scheduler_hints.force_nodes": _spec(
        scheduler_hints={"force_nodes": [f"h{i}" for i in range(N + 1)]}
    ),
}


@pytest.mark.parametrize("field", sorted(OVER))
def test_a_spec_list_over_the_limit_is_refused_naming_the_field_and_the_limit(field):
    with pytest.raises(rs.InvalidRequestSpec) as err:
        rs.load_request_spec(OVER[field])
    assert any(p.startswith(f"{field}") and f"{N}" in p for p in err.value.problems), (
        err.value.problems
    )


def test_spec_lists_at_the_limit_load():
    spec = rs.load_request_spec(
        _spec(
            required=[f"CUSTOM_T{i}" for i in range(N)],
            member_of=[[AGG] * N] * N,
            node_selector={f"l{i}": "v" for i in range(N)},
            scheduler_hints={"force_hosts": [f"h{i}" for i in range(N)]},
        )
    )
    assert len(spec.required) == N and len(spec.node_selector) == N


class _Scheduler:
    stats = {"races_lost": 0}


@pytest.fixture
def sched_endpoint(monkeypatch):
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    endpoint = sched_service.SchedulerEndpoint(conf, object)
    monkeypatch.setattr(endpoint, "_scheduler", lambda: _Scheduler())
    return endpoint


def test_the_scheduler_answers_a_spec_over_a_limit_invalid_and_the_others_on(sched_endpoint):
    answers = sched_endpoint.select_destinations_many({}, [OVER["required"], {"bad": 1}])
    assert [a["status"] for a in answers] == ["invalid", "invalid"]
    assert f"required: at most {N} traits" in answers[0]["error"]


def test_the_scheduler_refuses_a_message_of_too_many_requests(sched_endpoint, caplog):
    limit = rs.MAX_REQUESTS_PER_MESSAGE
    with caplog.at_level(logging.WARNING):
        answer = sched_endpoint.select_destinations_many({}, [_spec()] * (limit + 1))
    assert answer["status"] == "invalid"
    assert f"request_specs: at most {limit}" in answer["error"]
    assert len([r for r in caplog.records if "request_specs" in r.getMessage()]) == 1


@pytest.fixture
def conductor(monkeypatch):
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    c = cservice.Conductor(
        conf, object(), rpc.transport_of(conf), driver_mod.SimulatedDriver(), "c1"
    )
    c.recorded = []
    c.refusals = []
    monkeypatch.setattr(c.records, "create_held", lambda items: c.recorded.extend(items) or {})
    monkeypatch.setattr(c.super_conductor, "schedule_and_dispatch", lambda *a: None)
    monkeypatch.setattr(c.outcomes, "request_refused", lambda *a: c.refusals.append(a))
    return c


def test_a_build_instances_many_over_the_limit_is_refused_whole_and_logged_once(conductor, caplog):
    limit = rs.MAX_REQUESTS_PER_MESSAGE
    specs = [_spec(request_id=f"r{i}") for i in range(limit + 1)]
    with caplog.at_level(logging.WARNING):
        conductor.build_instances_many(specs, "build-submit.abc")
    assert conductor.recorded == []
    refused = [r for r in caplog.records if f"request_specs: at most {limit}" in r.getMessage()]
    assert len(refused) == 1


@pytest.mark.parametrize(
    "topic", [["build-submit.a"], {"t": 1}, 5, "", "x" * 256, "build-submit a", "../x"]
)
def test_a_request_with_a_reply_topic_that_is_not_one_is_refused_before_anything_is_recorded(
    conductor, topic, caplog
):
    with caplog.at_level(logging.WARNING):
        cservice.SuperConductorEndpoint(conductor).build_instances({}, _spec(), topic)
        conductor.build_instances_many([_spec(request_id="r1")], topic)
    assert conductor.recorded == []
    assert len([r for r in caplog.records if "reply_topic" in r.getMessage()]) == 2


def test_good_reply_topics_are_taken(conductor):
    for topic in ("build-submit.0123abcd", "test42.build-submit.ab", None):
        conductor.build_instances(_spec(num_instances=1), topic)
    assert len(conductor.recorded) == 3


class _Cells:
    def __init__(self):
        self.sent = []

    def build_many(self, cell, builds, reply_topic):
        self.sent.append((cell, builds, reply_topic))


def _build(n):
    return {
        "instance_uuid": f"00000000-0000-4000-8000-{n:012d}",
        "request_spec": {},
        "selections": {},
        "generation": 1,
    }


def test_a_bad_reply_topic_in_a_shared_flush_does_not_fail_the_other_builds(conductor):
    conductor.conductors = _Cells()
    super_conductor.send_builds(
        conductor.bus, "cell1", [(_build(1), "build-submit.a"), (_build(2), ["x"])]
    )
    [(cell, builds, topic)] = conductor.conductors.sent
    assert topic == "build-submit.a"
    assert [b["instance_uuid"] for b in builds] == [
        _build(1)["instance_uuid"],
        _build(2)["instance_uuid"],
    ]


class _CellBuild:
    """Stands for the cell conductor's build: what reaches it was let in."""

    def __init__(self):
        self.handled = []

    def build_many(self, builds):
        self.handled.append(builds)

    def build_one(self, build):
        self.handled.append(build)


@pytest.mark.parametrize(
    ("builds", "topic", "reason"),
    [
        (
            [_build(n) for n in range(rs.MAX_BUILDS_PER_MESSAGE + 1)],
            "build-submit.a",
            f"builds: at most {rs.MAX_BUILDS_PER_MESSAGE}",
        ),
        ([_build(1)], ["build-submit.a"], "reply_topic must be a non-empty string"),
        ([{**_build(1), "reply_topic": "a b"}], None, "builds[0].reply_topic"),
    ],
)
def test_a_cell_conductor_drops_a_build_many_over_a_limit_or_with_a_bad_topic(
    conductor, builds, topic, reason, caplog
):
    cell = conductor.build_intake.cell_build = _CellBuild()
    with caplog.at_level(logging.WARNING):
        cservice.CellConductorEndpoint(conductor).build_many({}, builds, topic)
    assert cell.handled == []
    assert len([r for r in caplog.records if reason in r.getMessage()]) == 1


def test_a_cell_conductor_drops_a_build_instance_with_a_bad_topic(conductor, caplog):
    cell = conductor.build_intake.cell_build = _CellBuild()
    with caplog.at_level(logging.WARNING):
        cservice.CellConductorEndpoint(conductor).build_instance({}, INST, {}, {}, 7, 1)
    assert cell.handled == []
    assert any("reply_topic" in r.getMessage() for r in caplog.records)
