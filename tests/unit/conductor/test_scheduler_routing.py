"""Each kind of request to one scheduler worker (conductor.scheduler_routing)."""

import collections
import logging
import threading
import time

from conductor import conf as cconf
from conductor import scheduler_routing as routing
from conductor import super_conductor as super_mod
from joule import request_spec as spec_mod
from joule import rpc
from joule.rpc import oslo_messaging


class _Workers:
    """Stands for the scheduler's bus client: says which workers are live."""

    def __init__(self, members, delay=0.0):
        self.members = list(members)
        self.delay = delay
        self.asks = 0
        self.fail = None

    def scheduler_workers(self, timeout):
        self.asks += 1
        time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return list(self.members)


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _spec(n, vcpu=2, project="p", workload="standard", instances=1):
    spec = spec_mod.load_request_spec(
        {
            "version": "1.4",
            "request_id": f"req-{n}",
            "project_id": project,
            "user_id": "u",
            "workload_class": workload,
            "num_instances": instances,
            "resources": {"VCPU": vcpu, "MEMORY_MB": 1024},
        }
    )
    return spec_mod.dump_request_spec(spec)


def _wait(predicate, seconds=5):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_with_one_worker_known_every_request_goes_on_the_shared_topic():
    for members in ([], ["w1"]):
        router = routing.Router(lambda m=members: _Workers(m))
        assert router.owner(_spec(1)) is None


def test_a_kind_has_one_owner_whatever_its_ids_amounts_and_instances():
    api = _Workers(["w1", "w2", "w3", "w4"])
    router = routing.Router(lambda: api)
    owners = {router.owner(_spec(n, vcpu=1 + n % 8, instances=1 + n % 3)) for n in range(50)}
    assert len(owners) == 1 and owners <= set(api.members)
    assert api.asks == 1  # asked once, not per request


def test_kinds_spread_over_the_workers_and_a_worker_leaving_moves_only_its_own():
    api = _Workers(["w1", "w2", "w3", "w4"])
    clock = _Clock()
    router = routing.Router(lambda: api, clock=clock)
    kinds = [_spec(0, project=f"project-{n}") for n in range(200)]
    before = [router.owner(k) for k in kinds]
    counts = collections.Counter(before)
    assert set(counts) == set(api.members)
    assert min(counts.values()) >= 25  # 50 each on average
    api.members.remove("w3")
    clock.now += routing.REFRESH_SECONDS
    router.owner(kinds[0])  # asks again, in the background
    _wait(lambda: "w3" not in router.members())
    after = [router.owner(k) for k in kinds]
    for old, new in zip(before, after, strict=True):
        assert new == old if old != "w3" else new in ("w1", "w2", "w4")


def test_a_worker_that_let_a_call_time_out_gets_none_until_its_suspicion_ends():
    api = _Workers(["w1", "w2"])
    clock = _Clock()
    router = routing.Router(lambda: api, clock=clock)
    kind = _spec(1)
    owner = router.owner(kind)
    router.suspect(owner)
    # One worker left: the shared topic (any worker), not a call to the suspect.
    assert router.owner(kind) is None
    api.members.append("w3")
    clock.now += routing.REFRESH_SECONDS
    router.owner(kind)
    _wait(lambda: "w3" in router.members())
    assert router.owner(kind) not in (None, owner)
    clock.now += routing.SUSPECT_SECONDS
    router.owner(kind)
    _wait(lambda: owner in router.members())
    assert router.owner(kind) in router.members()


def test_workers_that_cannot_say_who_is_live_are_called_on_the_shared_topic(caplog):
    caplog.set_level(logging.INFO, logger=routing.__name__)
    api = _Workers(["w1", "w2"])
    api.fail = rpc.SchedulerAnswerError("scheduler_workers: unsupported version 1.4")
    clock = _Clock()
    router = routing.Router(lambda: api, clock=clock)
    assert router.owner(_spec(1)) is None
    assert "cannot say which of them are live" in caplog.text
    api.fail = rpc.Unanswered("no scheduler answered within 2 s")
    clock.now += routing.REFRESH_SECONDS
    router.owner(_spec(1))
    _wait(lambda: api.asks == 2 and not router._asking)
    assert router.owner(_spec(1)) is None
    # A client without the method (the simulator's direct calls) is never asked.
    bare = routing.Router(lambda: object())
    assert bare.owner(_spec(1)) is None


def test_an_unanswered_ask_keeps_the_workers_known_for_a_while():
    api = _Workers(["w1", "w2"])
    clock = _Clock()
    router = routing.Router(lambda: api, clock=clock)
    owner = router.owner(_spec(1))
    assert owner in api.members
    api.fail = rpc.Unanswered("no scheduler answered within 2 s")
    clock.now += routing.REFRESH_SECONDS
    router.owner(_spec(1))
    _wait(lambda: api.asks == 2 and not router._asking)
    assert router.owner(_spec(1)) == owner  # still routed
    clock.now += routing.STALE_SECONDS
    router.owner(_spec(1))
    _wait(lambda: api.asks == 3 and router.members() == ())
    assert router.owner(_spec(1)) is None


def test_requests_arriving_during_the_first_ask_wait_for_it():
    api = _Workers(["w1", "w2"], delay=0.2)
    router = routing.Router(lambda: api)
    owners = []
    threads = [
        threading.Thread(target=lambda: owners.append(router.owner(_spec(1)))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert api.asks == 1
    assert len(owners) == 8 and len(set(owners)) == 1 and owners[0] in api.members


class _Scheduler:
    """The bus client as select_many_routed calls it."""

    def __init__(self, silent=()):
        self.calls = []
        self.silent = set(silent)
        self.lock = threading.Lock()

    def select_destinations_many(self, specs, releases=None, server=None, on_silent=None):
        with self.lock:
            self.calls.append((server, [s["request_id"] for s in specs]))
        if server in self.silent:
            on_silent()
            raise rpc.Unanswered("no scheduler answered within 1 s (3 tries)")
        return [{"status": "placed", "request_id": s["request_id"]} for s in specs]


def _bus(scheduler):
    return type("Bus", (), {"scheduler": scheduler})()


def test_a_flush_is_sent_in_one_part_per_owner_and_answered_in_order():
    api = _Workers(["w1", "w2", "w3"])
    router = routing.Router(lambda: api)
    bus = _bus(_Scheduler())
    kinds = {f"project-{n}": router.owner(_spec(0, project=f"project-{n}")) for n in range(12)}
    assert len(set(kinds.values())) == 3
    items = [(_spec(n, project=f"project-{n % 12}"), None) for n in range(48)]
    answers = super_mod.select_many_routed(bus, router, items)
    assert [a["request_id"] for a in answers] == [f"req-{n}" for n in range(48)]
    assert sorted(server for server, _ids in bus.scheduler.calls) == ["w1", "w2", "w3"]
    for server, ids in bus.scheduler.calls:
        for rid in ids:
            assert kinds[f"project-{int(rid.split('-')[1]) % 12}"] == server


def test_with_nothing_routed_a_flush_is_one_call_on_the_shared_topic():
    router = routing.Router(lambda: _Workers(["w1"]))
    bus = _bus(_Scheduler())
    items = [(_spec(n, project=f"project-{n}"), None) for n in range(8)]
    assert len(super_mod.select_many_routed(bus, router, items)) == 8
    assert bus.scheduler.calls == [(None, [f"req-{n}" for n in range(8)])]


def test_a_part_its_worker_let_time_out_fails_only_its_own_requests_and_suspects_it():
    api = _Workers(["w1", "w2"])
    router = routing.Router(lambda: api)
    specs = [_spec(n, project=f"project-{n}") for n in range(16)]
    owners = [router.owner(s) for s in specs]
    silent = owners[0]
    bus = _bus(_Scheduler(silent={silent}))
    answers = super_mod.select_many_routed(bus, router, [(s, None) for s in specs])
    for owner, answer in zip(owners, answers, strict=True):
        if owner == silent:
            assert isinstance(answer, rpc.Unanswered)
        else:
            assert answer["status"] == "placed"
    assert silent not in router.members()
    assert router.owner(specs[0]) is None  # one worker left: the shared topic


class _Client:
    """The RPC client: the call sent to one worker times out, the shared
    topic answers."""

    def __init__(self):
        self.tries = []

    def prepare(self, server=None, **_kw):
        parent = self

        class _Prepared:
            def prepare(self, **_kw2):
                return self

            def call(self, _ctxt, method, **kw):
                parent.tries.append(server)
                if server is not None:
                    raise oslo_messaging.MessagingTimeout("gone")
                return [{"status": "placed"} for _ in kw["request_specs"]]

        return _Prepared()


def test_a_routed_call_unanswered_is_released_and_retried_on_the_shared_topic(monkeypatch):
    monkeypatch.setattr(rpc.time, "sleep", lambda _s: None)
    conf = cconf.make_conf(
        overrides={
            (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
            ("rpc", "call_retries"): 2,
            ("rpc", "call_timeout"): 1,
        }
    )
    api = rpc.SchedulerAPI(conf, rpc.transport_of(conf))
    api._client = _Client()
    released, silent = [], []
    answers = api.select_destinations_many(
        [{"request_id": "r1"}],
        releases=[lambda: released.append("r1")],
        server="w2",
        on_silent=lambda: silent.append("w2"),
    )
    assert answers == [{"status": "placed"}]
    assert api._client.tries == ["w2", None]
    assert released == ["r1"] and silent == ["w2"]
