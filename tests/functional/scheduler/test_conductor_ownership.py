"""Two conductors at once: the failures issue 11 measured, as regression tests.

1. An instance failed and released by one conductor was claimed and built
   by the other (which had the same instance in hand).
2. A second conductor starting (then: ``resume_pending``) released the first
   one's live claims and rebuilt its in-flight instances, so an instance ran
   on one host while its allocation sat on another.

Now a conductor acts only on build requests it holds (a lease taken by
compare-and-set), a finished record is never touched again, and a record is
taken over only once its holder's lease has run out, by asking the
hypervisors and placement what the dead holder left.
"""

import datetime
import queue
import threading
import time
import uuid

import pytest

from conductor import conf as cconf
from conductor import driver as driver_mod
from conductor import service as cond_service
from conductor import submit
from joule import request_spec as spec_mod
from joule import rpc
from placement import models
from scheduler import claim as claim_mod
from scheduler import conf as sconf
from scheduler import worker as worker_mod
from tests import builders


@pytest.fixture
def cloud(db, live_server, tmp_path):
    hosts = {}
    for name in ("hA", "hB"):
        rp = builders.create_provider(db, name=name)
        builders.set_inventory(db, rp, "VCPU", 8)
        builders.set_inventory(db, rp, "MEMORY_MB", 8192)
        hosts[name] = rp
    conf = cconf.make_conf(
        overrides={
            ("placement", "endpoint_override"): live_server.url,
            (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
            ("conductor", "lease_seconds"): 60,
            ("scheduler", "max_attempts"): 2,
        }
    )
    pc = sconf.placement_client_of(conf)
    for rp in hosts.values():
        pc.request("PUT", f"/nodes/{rp}", json={"cell": "cell1"}, ok=(200, 201))
    transport = rpc.transport_of(conf)
    state = str(tmp_path / "hypervisors")

    def conductor(name, failure_rate=0.0):
        driver = driver_mod.SimulatedDriver(failure_rate=failure_rate, state_dir=state)
        return cond_service.Conductor(
            conf, sconf.placement_client_of(conf), transport, driver, name
        )

    yield {"conf": conf, "hosts": hosts, "client": pc, "conductor": conductor}
    transport.cleanup()


def _scheduled(cloud, super_conductor):
    """One instance recorded and scheduled the way a super conductor does:
    held, claimed on its selected host, handed off; returns the cast's
    (instance, spec message, selections message)."""
    instance, wire, message, generation = _scheduled_held(cloud, super_conductor)
    assert super_conductor.records.take(instance, generation, hand_off=True) is not None
    return instance, wire, message


def _spec_of(instance):
    """The spec of a one-instance request for ``instance``."""
    return spec_mod.load_request_spec(
        {
            "version": "1.0",
            "request_id": f"req-{instance[:8]}",
            "project_id": "p",
            "user_id": "u",
            "resources": {"VCPU": 1, "MEMORY_MB": 512},
            "instance_uuids": [instance],
        }
    )


def _allocated_on(cloud, instance):
    return set(cloud["client"].get_allocations(instance)[0])


def _record(cloud, instance):
    return cloud["client"].request("GET", f"/build_requests/{instance}").json()


def test_instance_failed_and_released_by_one_is_never_built_by_the_other(cloud):
    super_c = cloud["conductor"]("super")
    a = cloud["conductor"]("cond-a", failure_rate=1.0)  # every build fails on A
    b = cloud["conductor"]("cond-b")
    instance, wire, message = _scheduled(cloud, super_c)

    a.build_instance(instance, wire, message)
    rec = _record(cloud, instance)
    assert rec["status"] == "failed" and "failed on all 2 host(s)" in rec["reason"]
    assert _allocated_on(cloud, instance) == set()

    # B has the same instance in hand (the same message): it must not claim
    # or build what A failed and released.
    b.build_instance(instance, wire, message)
    b.sweep_once()
    assert _allocated_on(cloud, instance) == set()
    assert b.driver.host_of(instance) is None and b.driver.built == []
    rec = _record(cloud, instance)
    assert rec["status"] == "failed" and rec["owner"] is None


def test_instance_held_by_one_is_left_alone_by_the_other(cloud):
    super_c = cloud["conductor"]("super")
    a, b = cloud["conductor"]("cond-a"), cloud["conductor"]("cond-b")
    instance, wire, message = _scheduled(cloud, super_c)
    claimed = _allocated_on(cloud, instance)
    # A takes it (it is mid-build); B gets the same message meanwhile.
    assert a.records.take(instance, _record(cloud, instance)["generation"]) is not None
    b.build_instance(instance, wire, message)
    assert _allocated_on(cloud, instance) == claimed
    assert b.driver.built == [] and b.driver.host_of(instance) is None
    assert _record(cloud, instance)["owner"] == "cond-a"


def _held_in_flight(cloud, a, spawned):
    """An instance A holds under a live lease with its claim, built (or not)."""
    instance, _wire, message = _scheduled(cloud, cloud["conductor"]("super"))
    assert a.records.take(instance, _record(cloud, instance)["generation"]) is not None
    host = spec_mod.load_selections(message).selections[0][0]
    if spawned:
        a.driver.spawn(instance, host)
    return instance, host.host_uuid


def _expire(db, instance):
    with db.write() as conn:
        conn.execute(
            models.build_requests.update()
            .where(models.build_requests.c.instance_uuid == instance)
            .values(lease_expires_at=datetime.datetime(2000, 1, 1))
        )


def test_second_conductor_leaves_live_work_alone_and_finishes_dead_work_once(cloud, db):
    a = cloud["conductor"]("cond-a")
    running, running_host = _held_in_flight(cloud, a, spawned=True)
    claimed, claimed_host = _held_in_flight(cloud, a, spawned=False)

    # B starts while A lives: nothing of A's is taken, released or rebuilt.
    b = cloud["conductor"]("cond-b")
    assert b.sweep_once() == 0
    assert _allocated_on(cloud, running) == {running_host}
    assert _allocated_on(cloud, claimed) == {claimed_host}
    assert b.driver.built == []
    assert {_record(cloud, i)["owner"] for i in (running, claimed)} == {"cond-a"}

    # A dies (its leases run out): B takes over. The instance that runs is
    # placed where it runs, not built again; the one that only had a claim
    # is built on its claimed host, once.
    _expire(db, running)
    _expire(db, claimed)
    assert b.sweep_once() == 2
    rec = _record(cloud, running)
    assert (rec["status"], rec["host_uuid"]) == ("placed", running_host)
    assert _allocated_on(cloud, running) == {running_host}
    rec = _record(cloud, claimed)
    assert (rec["status"], rec["host_uuid"]) == ("placed", claimed_host)
    assert _allocated_on(cloud, claimed) == {claimed_host}
    assert b.driver.built == [(claimed, claimed_host)]
    assert b.driver.host_of(running) == running_host

    # A comes back from the dead: it cannot finish or release what is B's.
    assert a.records.finish(running, "failed", reason="late") is False
    assert _record(cloud, running)["status"] == "placed"


# -- bulk calls (issue 12): a lost record is answered alone, the rest go on --


def _held(cloud, conductor, count):
    """``count`` records created held by ``conductor`` in one call."""
    items = []
    for _ in range(count):
        instance = str(uuid.uuid4())
        spec = {
            "version": "1.0",
            "request_id": f"req-{instance[:8]}",
            "project_id": "p",
            "user_id": "u",
            "resources": {"VCPU": 1},
            "instance_uuids": [instance],
        }
        items.append(
            {
                "instance_uuid": instance,
                "request_id": spec["request_id"],
                "workload_class": "standard",
                "spec": spec,
            }
        )
    gens = conductor.records.create_held(items)
    return [i["instance_uuid"] for i in items], gens


def test_bulk_take_answers_the_lost_record_and_takes_the_others(cloud):
    super_c, a, b = (cloud["conductor"](n) for n in ("super-1", "cell-a", "cell-b"))
    instances, gens = _held(cloud, super_c, 3)
    handed = super_c.records.take_many(gens, hand_off=True)
    assert handed == {i: 1 for i in instances}
    one, two, three = instances
    assert b.records.take(two, 1) == 2
    # cell-a's bulk take loses two (b holds it) and still takes one and three.
    assert a.records.take_many(handed) == {one: 2, two: None, three: 2}
    owners = {i: (_record(cloud, i)["owner"], _record(cloud, i)["generation"]) for i in instances}
    assert owners == {one: ("cell-a", 2), two: ("cell-b", 2), three: ("cell-a", 2)}
    # A renewal of what it holds plus one it never held: the held ones renew.
    assert a.records.take_many({one: 2, two: 2, three: 2}) == {one: 3, two: None, three: 3}
    assert _record(cloud, two)["owner"] == "cell-b"


def test_bulk_finish_leaves_a_record_taken_over_and_finishes_the_rest(cloud, db):
    a, b = cloud["conductor"]("cell-a"), cloud["conductor"]("cell-b")
    (one, two, three), gens = _held(cloud, a, 3)
    # cell-a stalled past its lease on two; cell-b took it over.
    with db.write() as conn:
        conn.execute(
            models.build_requests.update()
            .where(models.build_requests.c.instance_uuid == two)
            .values(lease_expires_at=datetime.datetime(2000, 1, 1))
        )
    assert b.records.take(two, gens[two]) is not None
    host = cloud["hosts"]["hA"]
    done = a.records.finish_many(
        [(one, "placed", host, None), (two, "placed", host, None), (three, "failed", None, "r")]
    )
    assert done == [True, False, True]
    statuses = [
        (_record(cloud, i)["status"], _record(cloud, i)["owner"]) for i in (one, two, three)
    ]
    assert statuses == [("placed", None), ("pending", "cell-b"), ("failed", None)]


def test_build_many_builds_what_it_takes_and_leaves_the_rest(cloud):
    super_c, a, b = (cloud["conductor"](n) for n in ("super-1", "cell-a", "cell-b"))
    scheduled = [_scheduled(cloud, super_c) for _ in range(3)]
    builds = [
        {"instance_uuid": i, "request_spec": w, "selections": m, "generation": 1}
        for i, w, m in scheduled
    ]
    lost = builds[1]["instance_uuid"]
    assert b.records.take(lost, 1) == 2  # another conductor has it in hand
    a.build_many(builds)
    for i, _w, _m in scheduled:
        rec = _record(cloud, i)
        if i == lost:
            assert (rec["status"], rec["owner"]) == ("pending", "cell-b")
            assert a.driver.host_of(i) is None
        else:
            assert rec["status"] == "placed"
            assert _allocated_on(cloud, i) == {rec["host_uuid"]}
            assert a.driver.host_of(i) == rec["host_uuid"]
    # A record already finished is not built again by a second delivery.
    finished = builds[0]
    before = _record(cloud, finished["instance_uuid"])
    a.build_many([{**finished, "generation": before["generation"]}])
    assert _record(cloud, finished["instance_uuid"]) == before


def _scheduled_held(cloud, super_conductor):
    """As ``_scheduled`` but still held by ``super_conductor`` (a cast
    without a hand-off): returns (instance, spec message, selections
    message, held generation)."""
    instance = str(uuid.uuid4())
    spec = _spec_of(instance)
    wire = spec_mod.dump_request_spec(spec)
    gens = super_conductor.records.create_held(
        [
            {
                "instance_uuid": instance,
                "request_id": spec.request_id,
                "workload_class": spec.workload_class,
                "spec": wire,
            }
        ]
    )
    selections = worker_mod.Scheduler(cloud["conf"], cloud["client"]).select_destinations(spec)
    message = spec_mod.dump_selections(spec.request_id, selections)
    return instance, wire, message, gens[instance]


def _cast_by(instance, wire, message, generation, holder):
    """One build of a cast sent without a hand-off: ``holder`` still holds
    the record at ``generation``."""
    return {
        "instance_uuid": instance,
        "request_spec": wire,
        "selections": message,
        "generation": generation,
        "holder": holder,
    }


@pytest.mark.parametrize("builder", ["a cell conductor", "the holder itself"])
def test_builds_cast_without_a_hand_off_are_taken_from_their_holder(cloud, builder):
    # The super conductor casts while it still holds the records; the
    # builder takes each from it by name at the held generation. One
    # process serving both roles (the simulator's) names itself.
    super_c = cloud["conductor"]("super-1")
    cell = super_c if builder == "the holder itself" else cloud["conductor"]("cell-a")
    scheduled = [_scheduled_held(cloud, super_c) for _ in range(2)]
    for i, _w, _m, _g in scheduled:
        assert _record(cloud, i)["owner"] == "super-1"
    cell.build_many([_cast_by(i, w, m, g, "super-1") for i, w, m, g in scheduled])
    for i, _w, _m, _g in scheduled:
        rec = _record(cloud, i)
        assert rec["status"] == "placed"
        assert _allocated_on(cloud, i) == {rec["host_uuid"]}
        assert cell.driver.host_of(i) == rec["host_uuid"]
    # A stale cast (the generation has moved on) takes nothing.
    i, w, m, g = _scheduled_held(cloud, super_c)
    assert super_c.records.take(i, g) is not None  # renewed: generation + 1
    cell.build_many([_cast_by(i, w, m, g, "super-1")])
    rec = _record(cloud, i)
    assert (rec["status"], rec["owner"]) == ("pending", "super-1")
    assert cell.driver.host_of(i) is None


def _items(instances, request_id):
    spec = {
        "version": "1.0",
        "request_id": request_id,
        "project_id": "p",
        "user_id": "u",
        "resources": {"VCPU": 1},
        "instance_uuids": instances,
    }
    return [
        {"instance_uuid": i, "request_id": request_id, "workload_class": "standard", "spec": spec}
        for i in instances
    ]


def test_requests_created_together_refuse_only_the_redelivered_one(cloud):
    from conductor import records as records_mod

    records = records_mod.Records(cloud["client"], "super-1", 60, window=0.2, max_items=3)
    old = [str(uuid.uuid4())]
    records.create_held(_items(old, "req-old"))
    fresh = [[str(uuid.uuid4()), str(uuid.uuid4())] for _ in range(3)]
    groups = [
        _items(fresh[0], "req-a"),
        # A redelivery of req-old that also names a new instance.
        _items(old + fresh[1], "req-old"),
        _items(fresh[2], "req-b"),
    ]
    out = {}

    def create(n):
        try:
            out[n] = records.create_held(groups[n])
        except records_mod.AlreadyRecorded as exc:
            out[n] = exc

    threads = [threading.Thread(target=create, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out[0] == {i: 0 for i in fresh[0]} and out[2] == {i: 0 for i in fresh[2]}
    assert isinstance(out[1], records_mod.AlreadyRecorded)
    # Nothing of the refused request was recorded; the others are held.
    assert [_record(cloud, i)["owner"] for i in fresh[0] + fresh[2]] == ["super-1"] * 4
    for i in fresh[1]:
        resp = cloud["client"].request("GET", f"/build_requests/{i}", ok=(404,))
        assert resp.status_code == 404


class _HeldCells:
    """The super conductor's cells API, over the bus; its first build_many
    waits until released, so the casts asked for meanwhile queue up."""

    def __init__(self, api):
        self.api = api
        self.messages = []
        self.first_in = threading.Event()
        self.release = threading.Event()

    def build_many(self, cell, builds, reply_topic):
        self.messages.append((cell, builds, reply_topic))
        if len(self.messages) == 1:
            self.first_in.set()
            self.release.wait(10)
        self.api.build_many(cell, builds, reply_topic)


class _Submitter(submit._OutcomeEndpoint):
    """build-submit's endpoint, counting the messages it is handed."""

    def __init__(self):
        super().__init__(queue.Queue())
        self.messages = []

    def instance_done(self, ctxt, outcome):
        self.messages.append(("instance_done", 1))
        super().instance_done(ctxt, outcome)

    def instances_done(self, ctxt, outcomes):
        self.messages.append(("instances_done", len(outcomes)))
        super().instances_done(ctxt, outcomes)


def _wait_for(check, timeout=30):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_concurrent_hand_offs_share_one_cast_and_outcomes_one_message_per_submitter(cloud):
    """Four requests of two submitters handed off to one cell from four
    threads: the first cast alone (nobody was waiting), the three that
    queued behind it in one build_many (1.2: the build of the other
    submitter carries its reply topic); each submitter gets the outcomes
    built together in one message, over the in-memory bus."""
    conf, transport = cloud["conf"], rpc.transport_of(cloud["conf"])
    super_c = cloud["conductor"]("super-1")
    held = _HeldCells(super_c.conductors)
    super_c.conductors = held
    # A wide window, so the cell conductor's outcomes finished together
    # surely share a message on a busy machine.
    conf.set_override("batch_window_ms", 200, group="conductor")
    cell = cloud["conductor"]("cell-a")
    submitters = {"build-submit.x": _Submitter(), "build-submit.y": _Submitter()}
    cell_topic = rpc.cell_topic(conf, "cell1")
    servers = [
        rpc.make_server(
            conf, transport, cell_topic, [cond_service.CellConductorEndpoint(cell)], "cell-a"
        )
    ] + [rpc.make_server(conf, transport, t, [e], t) for t, e in submitters.items()]
    for server in servers:
        server.start()
    try:
        topics = ["build-submit.x", "build-submit.x", "build-submit.y", "build-submit.x"]
        builds = [
            {"instance_uuid": i, "request_spec": w, "selections": m, "generation": 1}
            for i, w, m in (_scheduled(cloud, super_c) for _ in topics)
        ]
        threads = [
            threading.Thread(target=super_c.super_conductor.cast_builds, args=("cell1", [b], t))
            for b, t in zip(builds, topics, strict=True)
        ]
        threads[0].start()
        assert held.first_in.wait(10)
        for t in threads[1:]:
            t.start()
        batcher = super_c.batchers.build_casts._batchers["cell1"]
        _wait_for(lambda: len(batcher._pending) == 3)
        held.release.set()
        for t in threads:
            t.join(10)
        first, second = held.messages
        assert first == ("cell1", [builds[0]], "build-submit.x")
        _cell, together, default = second
        assert default == "build-submit.x"
        assert sorted(b["instance_uuid"] for b in together) == sorted(
            b["instance_uuid"] for b in builds[1:]
        )
        # Only the build going elsewhere names its reply topic.
        assert {b["instance_uuid"]: b.get("reply_topic") for b in together} == {
            builds[1]["instance_uuid"]: None,
            builds[2]["instance_uuid"]: "build-submit.y",
            builds[3]["instance_uuid"]: None,
        }
        x, y = submitters["build-submit.x"], submitters["build-submit.y"]
        _wait_for(lambda: x.inbox.qsize() == 3 and y.inbox.qsize() == 1)
        # The lone first build's outcome as 1.0 (any submitter takes it);
        # the two built together for x in one message.
        assert x.messages == [("instance_done", 1), ("instances_done", 2)]
        assert y.messages == [("instance_done", 1)]
        got = {o["instance_uuid"] for _k, o in list(x.inbox.queue) + list(y.inbox.queue)}
        assert got == {b["instance_uuid"] for b in builds}
        for b in builds:
            rec = _record(cloud, b["instance_uuid"])
            assert rec["status"] == "placed"
            assert cell.driver.host_of(b["instance_uuid"]) == rec["host_uuid"]
    finally:
        for server in servers:
            server.stop()
            server.wait()


class _NoHost:
    """A scheduler that finds no host for anything."""

    def select_destinations(self, request_spec, on_retry=None):
        return {"status": "no_valid_host", "error": "no host has 9999 VCPU"}

    def select_destinations_many(self, request_specs, releases=None):
        return [self.select_destinations(s) for s in request_specs]


class _Outcomes:
    def __init__(self):
        self.messages = []

    def instance_done(self, reply_topic, outcome):
        self.messages.append((reply_topic, [outcome]))

    def instances_done(self, reply_topic, outcomes):
        self.messages.append((reply_topic, list(outcomes)))


def test_a_request_that_fits_nowhere_fails_in_one_finish_and_one_message(cloud):
    super_c = cloud["conductor"]("super-1")
    super_c.scheduler = _NoHost()
    outcomes = super_c.outcomes = _Outcomes()
    instances = [str(uuid.uuid4()) for _ in range(3)]
    super_c.build_instances(
        {
            "version": "1.0",
            "request_id": "req-nohost",
            "project_id": "p",
            "user_id": "u",
            "resources": {"VCPU": 1},
            "instance_uuids": instances,
        },
        "build-submit.z",
    )
    ((topic, sent),) = outcomes.messages
    assert topic == "build-submit.z"
    assert sorted(o["instance_uuid"] for o in sent) == sorted(instances)
    assert {o["status"] for o in sent} == {"failed"}
    assert all("no host has 9999 VCPU" in o["reason"] for o in sent)
    for i in instances:
        rec = _record(cloud, i)
        assert rec["status"] == "failed" and "no host has 9999 VCPU" in rec["reason"]


def test_records_of_a_request_larger_than_one_page_are_all_read(cloud):
    # GET /build_requests pages at 1,000 records by default: build-submit's
    # look at a large request must read every instance's record.
    from conductor import records as records_mod

    client = cloud["client"]
    request_id = "req-large"
    instances = [str(uuid.uuid4()) for _ in range(1203)]

    for start in range(0, len(instances), 400):
        body = {
            "build_requests": [
                builders.build_request(i, request_id) for i in instances[start : start + 400]
            ]
        }
        client.request("POST", "/build_requests", json=body, ok=(201,))
    records = records_mod.Records(client, "test-owner", 60)
    got = records.of_requests([request_id])
    assert sorted(r["instance_uuid"] for r in got) == sorted(instances)


def test_conductors_of_containers_sharing_a_hostname_and_pid_1_do_not_share_a_lease(
    cloud, monkeypatch
):
    """Two containers with the same hostname, each conductor PID 1: their
    owner names differ, so one cannot take (and build) what the other holds."""
    from joule import service as service_mod

    monkeypatch.setattr(service_mod.socket, "gethostname", lambda: "conductor")
    monkeypatch.setattr(service_mod.os, "getpid", lambda: 1)
    topic = rpc.cell_topic(cloud["conf"], "cell1")
    a = cloud["conductor"](service_mod.process_name(topic))
    b = cloud["conductor"](service_mod.process_name(topic))
    assert a.name != b.name
    assert a.name.startswith(f"{topic}@conductor:1:")
    instance, wire, message = _scheduled(cloud, cloud["conductor"]("super"))
    claimed = _allocated_on(cloud, instance)
    assert a.records.take(instance, _record(cloud, instance)["generation"]) is not None
    b.build_instance(instance, wire, message)
    assert b.driver.built == [] and _allocated_on(cloud, instance) == claimed
    assert _record(cloud, instance)["owner"] == a.name


# -- issue 23, finding 1: a conductor that lost its lease writes nothing --


class _StallThenFail(driver_mod.SimulatedDriver):
    """The first build stalls (the conductor paused past its lease) and
    fails; the next ones succeed."""

    def __init__(self, state_dir):
        super().__init__(state_dir=state_dir)
        self.entered, self.go_on = threading.Event(), threading.Event()

    def spawn(self, instance_uuid, selection, spec=None):
        if self.entered.is_set():
            return super().spawn(instance_uuid, selection)
        self.entered.set()
        assert self.go_on.wait(30)
        raise driver_mod.BuildFailed("stalled, then failed")


@pytest.mark.parametrize("taker", ["another conductor", "its own sweep"])
def test_a_conductor_whose_record_was_taken_over_mid_build_moves_no_claim(cloud, db, taker):
    super_c = cloud["conductor"]("super")
    a, b = cloud["conductor"]("cond-a"), cloud["conductor"]("cond-b")
    a.driver = a.cell_build.driver = a.sweeper.driver = _StallThenFail(b.driver.state_dir)
    instance, wire, message = _scheduled(cloud, super_c)
    first = spec_mod.load_selections(message).selections[0][0].host_uuid
    building = threading.Thread(target=a.build_instance, args=(instance, wire, message))
    building.start()
    assert a.driver.entered.wait(30)
    # A stalls past its lease (as a paused process would); a sweep takes the
    # record over (B's, or A's own: the same owner name) and builds on the
    # claimed host.
    _expire(db, instance)
    sweeper = b if taker == "another conductor" else a
    assert sweeper.sweep_once() == 1
    assert b.driver.host_of(instance) == first
    # A's build fails at last: it must not move the claim to an alternate
    # (the instance would run on one host with its allocation on another)
    # nor release it, nor finish the record.
    a.driver.go_on.set()
    building.join(30)
    assert _allocated_on(cloud, instance) == {first}
    rec = _record(cloud, instance)
    assert (rec["status"], rec["host_uuid"]) == ("placed", first)


def test_a_claim_write_is_refused_once_the_lease_is_lost(cloud, db):
    """The guard itself, as placement applies it: the generation and owner a
    conductor holds, a live lease, checked in the write's transaction."""
    super_c = cloud["conductor"]("super")
    a = cloud["conductor"]("cond-a")
    instance, _wire, message = _scheduled(cloud, super_c)
    hosts = spec_mod.load_selections(message).selections[0]
    gen = a.records.take(instance, _record(cloud, instance)["generation"])
    client, spec = cloud["client"], _spec_of(instance)
    alt = hosts[1].allocation_request
    # An old generation (taken since, even by the same owner) is refused.
    with pytest.raises(Exception) as refused:
        claim_mod.move(client, instance, alt, spec, lease=(gen - 1, "cond-a"))
    assert refused.value.code == "placement.build_request.lease_lost"
    # Another owner's name is refused.
    with pytest.raises(Exception) as refused:
        claim_mod.unclaim(client, instance, lease=(gen, "cond-b"))
    assert "held by cond-a" in refused.value.detail
    assert _allocated_on(cloud, instance) == {hosts[0].host_uuid}
    # The holder moves it.
    claim_mod.move(client, instance, alt, spec, lease=(gen, "cond-a"))
    assert _allocated_on(cloud, instance) == {hosts[1].host_uuid}
    # Its lease runs out: nothing more is written, not even a release.
    _expire(db, instance)
    with pytest.raises(Exception) as refused:
        claim_mod.unclaim(client, instance, lease=(gen, "cond-a"))
    assert "lease has run out" in refused.value.detail
    assert _allocated_on(cloud, instance) == {hosts[1].host_uuid}
    # A malformed header is a 400 that changes nothing.
    resp = client.request(
        "DELETE",
        f"/allocations/{instance}",
        ok=(400,),
        headers={"Joule-Build-Lease": "cond-a"},
    )
    assert "Malformed Joule-Build-Lease" in resp.json()["errors"][0]["detail"]
    assert _allocated_on(cloud, instance) == {hosts[1].host_uuid}


# -- issue 23, finding 7: a release deletes only the claim its writer made --


def test_a_late_release_leaves_the_claim_a_retry_made(cloud):
    super_c = cloud["conductor"]("super")
    instance, _wire, message = _scheduled(cloud, super_c)
    hosts = spec_mod.load_selections(message).selections[0]
    client, spec = cloud["client"], _spec_of(instance)
    mine = claim_mod.Claim(instance, hosts[0].allocation_request, spec)
    # The claim is released and made again elsewhere by a retry...
    claim_mod.unclaim(client, instance)
    claim_mod.claim(client, instance, hosts[1].allocation_request, spec)
    # ... then the first writer's unwind arrives late: it is left.
    claim_mod.release(client, [mine])
    assert _allocated_on(cloud, instance) == {hosts[1].host_uuid}
    # Its own claim it does release.
    claim_mod.release(client, [claim_mod.Claim(instance, hosts[1].allocation_request, spec)])
    assert _allocated_on(cloud, instance) == set()
