"""The threads a scheduler worker and a super conductor run on follow their
batch options unless [DEFAULT] executor_thread_pool_size is set; a
build_instances_many message's requests are queued together; a flush of
creates never names an instance twice in one body."""

import threading
import time

import pytest

from conductor import conf as cconf
from conductor import driver as driver_mod
from conductor import records as records_mod
from conductor import service as cservice
from joule import placement_client as client_mod
from joule import rpc
from scheduler import conf as sconf


def _sched_conf(overrides=None):
    return sconf.make_conf(overrides=overrides)


def test_a_batching_scheduler_worker_runs_batch_size_times_concurrent_batches_threads():
    conf = _sched_conf()
    assert conf.scheduler.batch_size == 64
    assert conf.scheduler.concurrent_batches == 2
    assert sconf.executor_threads(conf) == 128
    assert rpc.derive_executor_threads(conf, sconf.executor_threads(conf)) == 128
    assert conf.executor_thread_pool_size == 128


def test_raising_concurrent_batches_raises_the_threads_with_it():
    conf = _sched_conf({("scheduler", "concurrent_batches"): 4})
    assert rpc.derive_executor_threads(conf, sconf.executor_threads(conf)) == 256


def test_a_scheduler_worker_that_does_not_batch_keeps_8_threads():
    # Each of its threads walks and claims alone: oslo's 64 would race.
    conf = _sched_conf({("scheduler", "batch_size"): 1})
    assert rpc.derive_executor_threads(conf, sconf.executor_threads(conf)) == 8
    assert rpc.EXECUTOR_THREADS == 8


def test_threads_the_operator_set_are_kept():
    conf = _sched_conf({(None, "executor_thread_pool_size"): 16})
    assert rpc.executor_threads_configured(conf)
    assert rpc.derive_executor_threads(conf, sconf.executor_threads(conf)) == 16


def test_threads_set_in_the_environment_are_kept(monkeypatch):
    monkeypatch.setenv("OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE", "12")
    conf = _sched_conf()
    assert rpc.derive_executor_threads(conf, sconf.executor_threads(conf)) == 12


def _cond_conf(overrides=None):
    return cconf.make_conf(
        overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL, **(overrides or {})}
    )


def test_a_super_conductor_has_request_threads_for_every_call_in_flight_and_the_next():
    conf = _cond_conf()
    assert conf.conductor.schedule_batch_size == 64
    assert conf.conductor.schedule_calls_in_flight == 2
    assert cconf.request_threads(conf) == 64 * 3
    # 192 request threads: 3 messages of 64 requests, plus one; at least 8.
    assert cconf.super_executor_threads(conf) == 8
    raised = _cond_conf({("conductor", "schedule_calls_in_flight"): 16})
    assert cconf.request_threads(raised) == 64 * 17
    assert cconf.super_executor_threads(raised) == 17 + 1


def test_without_bulk_scheduling_the_request_threads_are_the_executor_threads():
    conf = _cond_conf(
        {("conductor", "schedule_batch_size"): 1, (None, "executor_thread_pool_size"): 5}
    )
    assert cconf.request_threads(conf) == 5


def _conductor(conf):
    return cservice.Conductor(
        conf, object(), rpc.transport_of(conf), driver_mod.SimulatedDriver(), "c1"
    )


def test_the_conductor_handles_bulk_requests_on_its_request_threads():
    conductor = _conductor(_cond_conf({("conductor", "schedule_calls_in_flight"): 3}))
    assert conductor.request_intake.request_threads._max_workers == 64 * 4


def test_a_message_s_requests_are_queued_together(monkeypatch):
    """Two messages handled at once: each message's requests are queued one
    after the other, not interleaved with the other's (build-submit would
    take a request queued behind the other message for a lost one)."""
    conductor = _conductor(_cond_conf())
    queued = []
    real_submit = conductor.request_intake.request_threads.submit

    def slow_submit(fn, spec, *args):
        queued.append(spec["request_id"][0])
        time.sleep(0.001)  # the other message's thread gets the CPU meanwhile
        return real_submit(fn, spec, *args)

    monkeypatch.setattr(conductor.request_intake.request_threads, "submit", slow_submit)
    monkeypatch.setattr(
        conductor.request_intake, "build_instances", lambda spec, reply_topic=None: None
    )
    threads = [
        threading.Thread(
            target=conductor.build_instances_many,
            args=([{"request_id": f"{name}{n}"} for n in range(30)],),
        )
        for name in "ab"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(queued) == ["a"] * 30 + ["b"] * 30
    # One run of each message's requests.
    assert queued in (["a"] * 30 + ["b"] * 30, ["b"] * 30 + ["a"] * 30)


class _Placement:
    """POST /build_requests: refuses a body naming an instance twice (400)
    and an instance it has (409 duplicate), as placement does."""

    def __init__(self):
        self.known = set()
        self.bodies = []

    def request(self, method, path, json=None, ok=(), **_kw):
        uuids = [r["instance_uuid"] for r in json["build_requests"]]
        self.bodies.append(uuids)
        if len(set(uuids)) != len(uuids):
            raise client_mod.PlacementError(method, path, 400, None, "twice")
        again = [u for u in uuids if u in self.known]
        if again:
            raise client_mod.PlacementError(
                method,
                path,
                409,
                records_mod.DUPLICATE,
                "recorded",
                items=[{"instance_uuid": u} for u in again],
            )
        self.known.update(uuids)

        class _Resp:
            @staticmethod
            def json():
                return {"build_requests": [{"instance_uuid": u, "generation": 1} for u in uuids]}

        return _Resp()


def _group(*uuids):
    return [{"instance_uuid": u, "request_id": "r"} for u in uuids]


def test_a_redelivery_in_the_same_flush_goes_in_a_later_body():
    placement = _Placement()
    records = records_mod.Records(placement, "c1", 60)
    groups = [_group("i1"), _group("i2"), _group("i1"), _group("i3")]
    results = records._create_chunked(groups)
    # No body names an instance twice; the first delivery and the others
    # share one body, the redelivery is refused alone.
    assert placement.bodies == [["i1", "i2", "i3"], ["i1"]]
    assert results[0] == {"i1": 1}
    assert results[1] == {"i2": 1}
    assert isinstance(results[2], records_mod.AlreadyRecorded)
    assert results[3] == {"i3": 1}


def test_one_body_when_nothing_repeats():
    placement = _Placement()
    records = records_mod.Records(placement, "c1", 60)
    assert records._create_chunked([_group("i1"), _group("i2", "i3")]) == [
        {"i1": 1},
        {"i2": 1, "i3": 1},
    ]
    assert placement.bodies == [["i1", "i2", "i3"]]


@pytest.mark.parametrize("batch", [None, 64])
def test_the_benchmark_overrides_nothing_unless_asked(batch):
    from benchmarks import bus_throughput as bench

    args = bench.argparse.Namespace(threads=None, calls_in_flight=None, call_timeout=None)
    assert bench._overrides(args, 4, None, None) == ({}, {})
    assert bench._override_lines(args, 4, None, None) == []
    sched, cond = bench._overrides(args, 4, batch, None)
    assert "OS_DEFAULT__EXECUTOR_THREAD_POOL_SIZE" not in sched
    assert cond == {}
    asked = bench.argparse.Namespace(threads=64, calls_in_flight="workers", call_timeout=120)
    lines = bench._override_lines(asked, 4, 64, None)
    assert "scheduler-worker: [DEFAULT] executor_thread_pool_size = 64" in lines
    assert "conductor-worker: [CONDUCTOR] schedule_calls_in_flight = 4" not in lines
    assert "conductor-worker: [conductor] schedule_calls_in_flight = 4" in lines
    assert "every service: [rpc] call_timeout = 120" in lines


def test_the_benchmark_fails_loudly_below_its_expected_rate(capsys):
    from benchmarks import bus_throughput as bench

    rows = [("5k", 5000, 1, None, None, {"instances_per_second": 26.6}, 1.0)]
    assert bench._expectation(bench.argparse.Namespace(expect_min=100.0), rows) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "below --expect-min 100" in err[0]
    assert bench._expectation(bench.argparse.Namespace(expect_min=20.0), rows) == 0
    assert bench._expectation(bench.argparse.Namespace(expect_min=None), rows) == 0


@pytest.mark.parametrize("workload", ["mixed", "small"])
def test_the_benchmark_warm_up_offers_each_kind_at_its_smallest(workload):
    # A worker walks a kind for the smallest amounts it has seen of it, so a
    # warm-up that misses a kind's smallest request leaves the measured run
    # to start with walks (issue 27's steady p99).
    import random

    from benchmarks import bus_throughput as bench

    args = bench.argparse.Namespace(workload=workload, per_request=1)
    smallest = {}
    for spec in bench._smallest_specs(args, 1, 0.5):
        key = (spec["workload_class"], tuple(sorted(spec["resources"])))
        smallest[key] = spec["resources"]
    rng = random.Random(7)
    for n in range(3000):
        spec = bench._spec(rng, n, 1, args, 0.5)
        key = (spec["workload_class"], tuple(sorted(spec["resources"])))
        assert key in smallest, key
        assert all(smallest[key][rc] <= amount for rc, amount in spec["resources"].items())
    assert len(smallest) == (3 if workload == "mixed" else 1)
