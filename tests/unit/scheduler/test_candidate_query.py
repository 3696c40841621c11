"""What the scheduler asks placement for: eco and draining hosts left out of a
performance request, node data only when a stage reads it, a random start."""

import random
import re

from joule import request_spec as spec_mod
from scheduler import candidate_query
from scheduler import worker
from scheduler.filters import compute
from tests import specs
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host

ECO_TRAIT = "CUSTOM_POWER_PROFILE_ECO"


_data = specs.spec_builder(resources={"VCPU": 2, "MEMORY_MB": 1024}, project_id="p", user_id="u")


def _spec(**kw):
    return spec_mod.load_request_spec(_data(**kw))


def _sched(hosts=(), **conf):
    fake = FakePlacement(list(hosts) or [host("a")])
    return fake, worker.Scheduler(make_conf(**conf), fake)


ASLEEP = sorted("!" + t for t in compute.ASLEEP_TRAITS)


def test_performance_query_forbids_the_eco_trait_standard_does_not():
    _fake, sched = _sched()
    perf = dict(candidate_query.query(_spec(workload_class="performance"), sched.filters))
    assert perf["root_required"] == ",".join(["!" + ECO_TRAIT, *ASLEEP])
    std = dict(candidate_query.query(_spec(workload_class="standard"), sched.filters))
    # Every request leaves out the nodes the power controller suspended
    # (the ComputeFilter's exclusion); only performance work the eco ones.
    assert std["root_required"] == ",".join(ASLEEP)
    # A spec that itself requires the trait is left to the filter (no contradiction
    # placement would answer with nothing, silently).
    odd = _spec(workload_class="performance", required=[ECO_TRAIT])
    assert dict(candidate_query.query(odd, sched.filters))["root_required"] == ",".join(ASLEEP)
    # Without the JoulieFilter eco hosts are not forbidden.
    _fake, plain = _sched(enabled_filters=["ComputeFilter"])
    assert dict(candidate_query.query(_spec(workload_class="performance"), plain.filters))[
        "root_required"
    ] == ",".join(ASLEEP)


def test_draining_and_eco_hosts_never_downloaded_for_performance_work():
    hosts = [host("p1"), host("e1", klass="eco"), host("d1", klass="draining")]
    fake, sched = _sched(hosts)
    for n in range(2):
        [[sel, *_]] = sched.select_destinations(
            {
                "version": "1.0",
                "resources": {"VCPU": 1, "MEMORY_MB": 512},
                "project_id": "p",
                "user_id": "u",
                "workload_class": "performance",
                "request_id": f"r{n}",
            }
        )
        assert sel.host_name == "p1"
    # The trait is made to exist once per worker (placement refuses an unknown
    # trait even to forbid it), not once per request.
    assert fake.calls.count(("PUT /traits", ECO_TRAIT)) == 1
    assert fake.reports["r1"]["hosts_seen"] == 1


def test_node_data_only_when_a_stage_reads_it():
    def fields(spec, **conf):
        _fake, sched = _sched(**conf)
        return candidate_query.node_fields(
            spec, sched.filters, sched.weighers, sched.conf.scheduler.max_attempts
        )

    # Defaults: ComputeFilter reads unschedulable, the heartbeat's age and
    # the power state, the alternates the cell, the power weigher the class,
    # the build-failure weigher the failure count.
    assert fields(_spec()) == {
        "unschedulable",
        "heartbeat_age",
        "power_state",
        "cell",
        "schedulable_class",
        "failed_builds",
    }
    bare = {
        "enabled_filters": ["CellFilter", "NodeSelectorFilter", "JoulieFilter"],
        "power_weight_multiplier": 0.0,
        "build_failure_weight_multiplier": 0.0,
        "max_attempts": 1,
    }
    assert fields(_spec(), **bare) == set()
    assert fields(_spec(cell="c1"), **bare) == {"cell"}
    assert fields(_spec(node_selector={"rack": "a"}), **bare) == {"labels"}
    assert fields(_spec(workload_class="performance"), **bare) == {"schedulable_class"}
    # The walk asks for node data accordingly.
    fake, sched = _sched([host("a"), host("b")], **bare)
    sched.select_destinations(
        {"version": "1.0", "resources": {"VCPU": 1}, "project_id": "p", "user_id": "u"}
    )
    sched.select_destinations(
        {
            "version": "1.0",
            "resources": {"VCPU": 1},
            "project_id": "p",
            "user_id": "u",
            "cell": "cell1",
        }
    )
    assert [nd for _q, nd, _s in fake.queries] == [False, True]


def test_start_points_are_valid_and_spread():
    rng = random.Random(7)
    points = [candidate_query.start_point(rng) for _ in range(2000)]
    assert all(re.fullmatch(r"0\.[0-9]{6}", p) for p in points)
    fifths = [0] * 5
    for p in points:
        fifths[int(float(p) * 5)] += 1
    assert all(300 < n < 500 for n in fifths), fifths


class _AlwaysHigh:
    def random(self):
        return 0.9999999999


def test_start_point_never_reaches_one():
    assert candidate_query.start_point(_AlwaysHigh()) == "0.999999"


def test_start_point_without_rng_follows_the_request_id():
    """Replays read hosts in the same order; distinct requests start all over."""
    assert candidate_query.start_point(request_id="req-1") == candidate_query.start_point(
        request_id="req-1"
    )
    points = {candidate_query.start_point(request_id=f"req-{i}") for i in range(200)}
    fifths = [sum(1 for p in points if i / 5 <= float(p) < (i + 1) / 5) for i in range(5)]
    assert len(points) > 190 and min(fifths) > 20, fifths
