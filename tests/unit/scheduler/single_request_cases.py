"""Single requests whose answers and explanations must not change.

Each case builds a fake placement, schedules one or more single requests
(``Scheduler.select_destinations``, seeded random numbers) and returns what
a caller sees: per instance the selected host and its alternates (names,
cells, claimed, allocation requests), or the error class and its text, and
the scheduling report placement stored (its duration left out). The answers
of the scheduler before its pipeline was rewritten are recorded in
``single_request_answers.json``; ``test_single_request_answers.py`` checks
the scheduler of today gives the same ones. ``python -m
tests.unit.scheduler.single_request_cases`` prints them (to record anew,
only when a change of answer is intended and said so).
"""

import json
import random
import sys
import uuid

from scheduler import worker
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host


def _instance(request_id, i):
    # A uuid per instance, stable across runs.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{request_id}/{i}"))


def spec(request_id, instances=1, **kw):
    data = {
        "version": "1.0",
        "request_id": request_id,
        "resources": {"VCPU": 2, "MEMORY_MB": 1024},
        "project_id": "p",
        "user_id": "u",
        "instance_uuids": [_instance(request_id, i) for i in range(instances)],
    }
    data.update(kw)
    return data


def _answer(sched, fake, data):
    out = {"request_id": data["request_id"]}
    try:
        result = sched.select_destinations(data)
    except worker.SchedulerError as exc:
        out["error"] = [type(exc).__name__, str(exc)]
    else:
        out["selections"] = [
            [
                {
                    "instance": s.instance_uuid,
                    "host": s.host_name,
                    "cell": s.cell,
                    "claimed": s.claimed,
                    "allocation_request": s.allocation_request,
                }
                for s in per_instance
            ]
            for per_instance in result
        ]
    report = dict(fake.reports.get(data["request_id"]) or {})
    report.pop("duration_ms", None)
    out["report"] = report
    out["held"] = {c: fake.holder_of(c) for c in data["instance_uuids"] if fake.holder_of(c)}
    return out


def _run(hosts, specs, seed=1, before=None, **conf):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(**conf), fake, rng=random.Random(seed))
    answers = []
    for data in specs:
        if before is not None:
            before(fake, data)
        answers.append(_answer(sched, fake, data))
    return answers


def _mixed_hosts():
    return (
        [host(f"a{i}", cell="A", ram=8192 + 512 * i, vcpu=8 + i % 3) for i in range(6)]
        + [host(f"b{i}", cell="B", ram=12288 - 256 * i, vcpu=12) for i in range(5)]
        + [host("e1", cell="A", klass="eco"), host("d1", cell="B", klass="draining")]
    )


def case_plain_alternates():
    return _run(_mixed_hosts(), [spec("plain")], max_attempts=3)


def case_stream_of_requests():
    specs = [spec(f"s{n}", instances=1 + n % 3) for n in range(8)]
    return _run(_mixed_hosts(), specs, seed=7, max_attempts=3)


def case_performance_and_standard():
    specs = [
        spec("perf", workload_class="performance"),
        spec("std", workload_class="standard", instances=2),
        spec("perf2", workload_class="performance", instances=2),
    ]
    return _run(_mixed_hosts(), specs, max_attempts=2)


def case_ties_and_subset():
    hosts = [host(f"t{i}") for i in range(12)]
    specs = [spec(f"tie{n}") for n in range(6)]
    return _run(hosts, specs, seed=3, host_subset_size=3, max_attempts=3)


def case_multi_instance_on_identical_hosts():
    hosts = [host(f"m{i}", cell="A" if i % 2 else "B") for i in range(8)]
    return _run(hosts, [spec("multi", instances=5)], seed=11, max_attempts=3)


def case_lost_race_takes_the_next():
    hosts = [host("best", ram=99999), host("next", ram=50000), host("other", ram=10000)]

    def steal_best(fake, _data):
        fake.steal.add(hosts[0]["uuid"])

    return _run(hosts, [spec("race")], before=steal_best)


def case_every_race_lost():
    hosts = [host("r1"), host("r2")]

    def steal_all(fake, _data):
        fake.steal.update(h["uuid"] for h in hosts)

    return _run(hosts, [spec("allraced")], before=steal_all)


def case_filters_explain():
    hosts = [
        host("down", unschedulable=True),
        host("wrong-cell", cell="other"),
        host("eco", klass="eco"),
        host("small", vcpu=1),
        host("stale", heartbeat_age=3600),
    ]
    specs = [
        spec("explain-perf", workload_class="performance"),
        spec("explain-cell", cell="cell1", workload_class="performance"),
    ]
    return _run(hosts, specs)


def case_no_candidates():
    return _run([host("tiny", vcpu=1)], [spec("nothing", resources={"VCPU": 64, "MEMORY_MB": 1})])


def case_not_every_instance_fits():
    hosts = [host("x1", vcpu=4), host("x2", vcpu=4)]
    return _run(hosts, [spec("toomany", instances=5)])


def case_capped_walk_reads_on():
    hosts = [host(f"c{i}", ram=20000 - i) for i in range(9)]

    def steal_first(fake, _data):
        fake.steal.update(h["uuid"] for h in hosts[:4])

    return _run(
        hosts,
        [spec("capped", instances=2)],
        before=steal_first,
        max_placement_results=4,
        page_size=2,
        random_walk_start=False,
    )


def case_host_turned_eco_for_performance():
    hosts = [host("p1", ram=99999), host("p2")]

    def flip(fake, _data):
        fake.flip_to_eco.add(hosts[0]["uuid"])

    return _run(hosts, [spec("flipped", workload_class="performance")], before=flip)


CASES = {
    name[len("case_") :]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")
}


def answers():
    return {name: fn() for name, fn in CASES.items()}


if __name__ == "__main__":
    json.dump(answers(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
