"""Batch scheduling over a fake placement: grouping, assumed usage, lost
races, and each caller getting its own answer."""

import copy
import random
import threading
import uuid

import pytest

from joule import placement_client as client_mod
from joule import request_spec as spec_mod
from scheduler import batcher as batcher_mod
from scheduler import batching
from scheduler import conf as conf_mod
from scheduler import server_groups
from scheduler import service
from scheduler import worker
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host
from tests.unit.wake_counts import callers_at_once


def spec(request_id, vcpu=2, ram=1024, n=1, **kw):
    return spec_mod.load_request_spec(
        {
            "version": "1.0",
            "request_id": request_id,
            "resources": {"VCPU": vcpu, "MEMORY_MB": ram},
            "project_id": "p",
            "user_id": "u",
            "num_instances": n,
            **kw,
        }
    )


def make(hosts, **conf):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(**conf), fake, rng=random.Random(1))
    return fake, sched


def walks(fake):
    return len(fake.queries)


def test_requests_differing_only_in_amounts_share_one_walk_and_one_claim():
    hosts = [host(f"h{i}", vcpu=16, ram=65536) for i in range(6)]
    fake, sched = make(hosts)
    specs = [spec(f"r{i}", vcpu=2 + i, ram=1024 * (i + 1)) for i in range(4)]
    outcomes = sched.select_batch(specs)
    assert [kind for kind, _v in outcomes] == [batching.PLACED] * 4
    # One walk, for the smallest amounts of the group.
    assert walks(fake) == 1
    [(query, _node_data, _start)] = fake.queries
    assert ("resources", "MEMORY_MB:1024,VCPU:2") in query
    # One claim for the whole batch, each instance with its own amounts.
    assert [c for c in fake.calls if c[0] in ("POST", "PUT")] == [
        ("POST", [s.instance_uuids[0] for s in specs])
    ]
    for s, (_kind, selections) in zip(specs, outcomes, strict=True):
        [[sel, *alts]] = selections
        assert sel.instance_uuid == s.instance_uuids[0] and sel.claimed
        held = fake.consumers[sel.instance_uuid]["allocations"]
        assert held == {
            sel.host_uuid: {"VCPU": s.resources["VCPU"], "MEMORY_MB": s.resources["MEMORY_MB"]}
        }
        for alt in alts:
            assert not alt.claimed
            [entry] = alt.allocation_request["allocations"].values()
            assert entry["resources"] == dict(s.resources)
    # One report per request, written in one call.
    assert ("POST /scheduling_reports", 4) in fake.calls
    assert all(fake.reports[s.request_id]["result"] == "placed" for s in specs)
    assert fake.reports["r0"]["batch"] == {"requests": 4, "instances": 4}


def test_different_kinds_of_request_walk_separately():
    hosts = [host("p1", vcpu=64, ram=1 << 20), host("e1", klass="eco", vcpu=64, ram=1 << 20)]
    fake, sched = make(hosts)
    specs = [
        spec("a", workload_class="performance"),
        spec("b", workload_class="standard"),
        spec("c", workload_class="performance", vcpu=4),
        spec("d", cell="cell1"),
    ]
    outcomes = sched.select_batch(specs)
    assert [k for k, _v in outcomes] == [batching.PLACED] * 4
    assert walks(fake) == 3
    assert batching.group_key(specs[0]) == batching.group_key(specs[2])
    assert batching.group_key(specs[0]) != batching.group_key(specs[1])
    # The performance requests never land on the eco host.
    for s, (_k, [[sel, *_]]) in zip(specs, outcomes, strict=True):
        if s.workload_class == "performance":
            assert sel.host_name == "p1"


def test_assumed_usage_keeps_a_batch_from_overfilling_a_host():
    # Two hosts of 4 VCPU; four requests of 2 VCPU: exactly full, each once.
    hosts = [host("a", vcpu=4, ram=65536), host("b", vcpu=4, ram=65536)]
    fake, sched = make(hosts)
    specs = [spec(f"r{i}") for i in range(4)]
    outcomes = sched.select_batch(specs)
    assert [k for k, _v in outcomes] == [batching.PLACED] * 4
    assert walks(fake) == 1
    assert [c[0] for c in fake.calls if c[0] in ("POST", "PUT")] == ["POST"]
    per_host = {}
    for _k, [[sel, *_]] in outcomes:
        per_host[sel.host_name] = per_host.get(sel.host_name, 0) + 1
    assert per_host == {"a": 2, "b": 2}
    assert all(v["VCPU"] == 4 for v in fake.used.values())


def test_assumed_usage_sends_what_no_longer_fits_alone_without_a_lost_race():
    fake, sched = make([host("a", vcpu=4, ram=65536)])
    outcomes = sched.select_batch([spec(f"r{i}") for i in range(3)])
    assert [k for k, _v in outcomes] == [batching.PLACED, batching.PLACED, batching.ALONE]
    # The batch knew the host was full: one claim, no race lost on it.
    assert [c[0] for c in fake.calls if c[0] in ("POST", "PUT")] == ["POST"]
    assert sched.stats["races_lost"] == 0


def test_ranking_follows_consumed_capacity():
    # RAM weigher: a big host first, then, once it is no longer the freest,
    # the other; the weights are recomputed as the batch consumes.
    hosts = [host("big", vcpu=64, ram=20000), host("small", vcpu=64, ram=12000)]
    fake, sched = make(hosts, cpu_weight_multiplier=0.0)
    specs = [spec(f"r{i}", ram=4000) for i in range(4)]
    outcomes = sched.select_batch(specs)
    names = [sel.host_name for _k, [[sel, *_]] in outcomes]
    # Free RAM before each pick: 20000/12000 -> big; 16000/12000 -> big;
    # 12000/12000 (a tie, shuffled) -> either; then the other one.
    assert names[:2] == ["big", "big"]
    assert sorted(names[2:]) == ["big", "small"]
    assert (
        fake.used[hosts[0]["uuid"]]["MEMORY_MB"] + fake.used[hosts[1]["uuid"]]["MEMORY_MB"] == 16000
    )


def test_a_request_that_no_longer_fits_the_walk_goes_alone():
    hosts = [host("a", vcpu=4, ram=65536)]
    fake, sched = make(hosts)
    outcomes = sched.select_batch([spec("r0", vcpu=4), spec("r1", vcpu=2)])
    assert outcomes[0][0] == batching.PLACED
    assert outcomes[1] == (batching.ALONE, None)
    # Alone, it gets the answer it would have got: NoValidHost, explained.
    with pytest.raises(worker.NoValidHost, match="placement returned no candidates"):
        sched.select_destinations(spec("r1", vcpu=2))
    assert "r1" in fake.reports and fake.reports["r1"]["result"] == "no_valid_host"


def test_a_lost_batch_claim_falls_back_to_claims_per_request():
    hosts = [host(f"h{i}", vcpu=2, ram=65536) for i in range(4)]
    fake, sched = make(hosts)
    specs = [spec(f"r{i}") for i in range(3)]
    # Another scheduler fills whichever host our first pick lands on.
    real_post = fake.post_allocations
    stolen = []

    def post(claims):
        if not stolen:
            rp = next(iter(claims[0][1]["allocations"]))
            fake.steal.add(rp)
            stolen.append(rp)
        return real_post(claims)

    fake.post_allocations = post
    outcomes = sched.select_batch(specs)
    posts = [c for c in fake.calls if c[0] == "POST"]
    # The batch's POST, then one per request.
    assert len(posts) == 4 and len(posts[0][1]) == 3
    assert outcomes[0] == (batching.ALONE, None)
    assert [k for k, _v in outcomes[1:]] == [batching.PLACED, batching.PLACED]
    assert sched.stats["races_lost"] == 1
    # Nothing of the loser is held; alone it lands elsewhere.
    assert specs[0].instance_uuids[0] not in fake.consumers
    [[sel, *_]] = sched.select_destinations(specs[0])
    assert sel.host_uuid != stolen[0]
    # Never over-committed, every instance placed once.
    for used in fake.used.values():
        assert used["VCPU"] <= 2
    assert len(fake.consumers) == 3


def test_a_batch_member_whose_host_turned_eco_goes_alone_and_lands_on_performance():
    """The batch POST is all or none: a performance member refused because its
    host became eco sinks the POST; the others claim per request, the refused
    one is scheduled alone, and no performance work ends on the eco host."""
    hosts = [host(f"h{i}", vcpu=2, ram=65536) for i in range(4)]
    fake, sched = make(hosts)
    specs = [spec(f"r{i}", workload_class="performance") for i in range(3)]
    real_post = fake.post_allocations
    flipped = []

    def post(claims):
        if not flipped:
            rp = next(iter(claims[0][1]["allocations"]))
            fake.flip_to_eco.add(rp)
            flipped.append(rp)
        return real_post(claims)

    fake.post_allocations = post
    outcomes = sched.select_batch(specs)
    assert outcomes[0] == (batching.ALONE, None)
    assert [k for k, _v in outcomes[1:]] == [batching.PLACED, batching.PLACED]
    assert sched.stats["races_lost"] == 1
    assert specs[0].instance_uuids[0] not in fake.consumers
    [[sel, *_]] = sched.select_destinations(specs[0])
    assert sel.host_uuid != flipped[0]
    assert fake.hosts[flipped[0]]["schedulable_class"] == "eco"
    for consumer in fake.consumers.values():
        assert flipped[0] not in consumer["allocations"]
    assert len(fake.consumers) == 3


def test_consumer_in_use_is_that_request_s_error_only():
    hosts = [host(f"h{i}", vcpu=8, ram=65536) for i in range(3)]
    fake, sched = make(hosts)
    specs = [spec(f"r{i}") for i in range(3)]
    taken = specs[1].instance_uuids[0]
    fake.put_allocations(
        taken, {"allocations": {hosts[2]["uuid"]: {"resources": {"VCPU": 1}}}}, "p", "u"
    )
    outcomes = sched.select_batch(specs)
    assert outcomes[0][0] == batching.PLACED and outcomes[2][0] == batching.PLACED
    kind, exc = outcomes[1]
    assert kind == batching.ERROR and isinstance(exc, worker.ConsumerInUse)
    # The other instance's claim is untouched.
    assert fake.consumers[taken]["allocations"] == {hosts[2]["uuid"]: {"VCPU": 1}}
    assert fake.reports["r1"]["result"] == "error"


def test_multi_instance_request_in_a_batch_excludes_its_hosts_from_alternates():
    hosts = [host(f"h{i}", cell="A", vcpu=2, ram=65536) for i in range(5)]
    fake, sched = make(hosts, max_attempts=3)
    outcomes = sched.select_batch([spec("multi", n=2), spec("one")])
    _k, selections = outcomes[0]
    chosen = {s[0].host_uuid for s in selections}
    assert len(chosen) == 2
    for _sel, *alts in selections:
        assert not {a.host_uuid for a in alts} & chosen


def test_placement_unreachable_on_the_claim_releases_and_sends_everyone_alone():
    hosts = [host(f"h{i}", vcpu=8, ram=65536) for i in range(3)]
    fake, sched = make(hosts)

    def down(claims):
        raise client_mod.PlacementUnreachable("POST", "/allocations", "http://x", "refused")

    fake.post_allocations = down
    specs = [spec("r0"), spec("r1")]
    assert sched.select_batch(specs) == [(batching.ALONE, None)] * 2
    assert fake.consumers == {}


def _view(policy, hosts=None):
    return server_groups.GroupView(
        {"uuid": str(uuid.uuid4()), "policy": policy, "hosts": hosts or {}}
    )


def test_soft_groups_and_instance_hints_are_not_batched():
    assert batching.batchable(spec("a"))
    grouped = spec("b", version="1.1", server_group=str(uuid.uuid4()))
    assert not batching.batchable(grouped)  # its group not read yet
    assert batching.batchable(grouped, _view("anti-affinity"))
    assert batching.batchable(grouped, _view("affinity"))
    assert not batching.batchable(grouped, _view("soft-anti-affinity"))
    hinted = spec("c", version="1.2", scheduler_hints={"different_host": [str(uuid.uuid4())]})
    assert not batching.may_batch(hinted) and not batching.batchable(hinted)


def test_anti_affinity_members_in_one_batch_see_each_other_and_claim_with_the_group():
    hosts = [host(f"h{i}", vcpu=64, ram=1 << 20) for i in range(3)]
    fake, sched = make(hosts, max_attempts=3)
    group = str(uuid.uuid4())
    # One member already runs on h0.
    view = server_groups.GroupView(
        {"uuid": group, "policy": "anti-affinity", "hosts": {hosts[0]["uuid"]: ["x"]}}
    )
    specs = [spec(f"g{i}", version="1.1", server_group=group) for i in range(3)] + [spec("free")]
    # Each member's thread read the group on its own: distinct, equal views.
    views = [view, copy.deepcopy(view), copy.deepcopy(view), None]
    claimed_groups = []
    real_put = fake.put_allocations

    def put(consumer, areq, project_id, user_id, gen=None, wc=None, ctype=None, sg=None):
        claimed_groups.append((consumer, sg))
        return real_put(consumer, areq, project_id, user_id, gen, wc, ctype, sg)

    fake.put_allocations = put
    outcomes = sched.select_batch(specs, views)
    # Two hosts are free of the group: two members placed there, one per host;
    # the third has nowhere to go in this walk and is scheduled alone.
    kinds = [k for k, _v in outcomes]
    assert kinds == [batching.PLACED, batching.PLACED, batching.ALONE, batching.PLACED]
    used = {outcomes[i][1][0][0].host_uuid for i in (0, 1)}
    assert used == {hosts[1]["uuid"], hosts[2]["uuid"]}
    # Alternates never offer a host the group rules out.
    for i in (0, 1):
        [[_sel, *alts]] = outcomes[i][1]
        assert hosts[0]["uuid"] not in {a.host_uuid for a in alts}
    # The claims carried the group (placement checks it in the write).
    by_consumer = dict(claimed_groups)
    assert by_consumer[specs[0].instance_uuids[0]] == group
    assert by_consumer[specs[3].instance_uuids[0]] is None


def test_batcher_each_caller_gets_its_own_outcome_and_batches_form_under_load():
    seen = []
    gate = threading.Event()

    def run(specs, groups):
        assert groups == [None] * len(specs)
        seen.append([s for s in specs])
        if len(seen) == 1:
            gate.wait(5)  # the first batch is slow: the others queue behind it
        return [(batching.PLACED, f"answer-{s}") for s in specs]

    batcher = batcher_mod.Batcher(run, size=10, window=0.0, slots=1)
    results = {}

    def call(name):
        results[name] = batcher.submit(name)

    first = threading.Thread(target=call, args=("s0",))
    first.start()
    for _ in range(500):
        if seen:
            break
        threading.Event().wait(0.01)
    others = [threading.Thread(target=call, args=(f"s{i}",)) for i in range(1, 6)]
    for t in others:
        t.start()
    for _ in range(500):
        if len(batcher._queue) >= 5:
            break
        threading.Event().wait(0.01)
    gate.set()
    for t in [first, *others]:
        t.join(5)
    assert results == {f"s{i}": (batching.PLACED, f"answer-s{i}") for i in range(6)}
    # A lone first call starts at once; the five that came meanwhile share one batch.
    assert [len(b) for b in seen] == [1, 5]


def test_batcher_a_failing_batch_sends_its_callers_alone():
    def run(specs, groups):
        raise RuntimeError("boom")

    batcher = batcher_mod.Batcher(run, size=4, window=0.0, slots=1)
    assert batcher.submit("x") == (batching.ALONE, None)


class _Locked:
    """The fake, one call at a time (it is not thread-safe; placement is)."""

    def __init__(self, fake):
        self._fake = fake
        self._lock = threading.RLock()

    def __getattr__(self, name):
        attr = getattr(self._fake, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with self._lock:
                out = attr(*args, **kwargs)
                return iter(list(out)) if name == "candidate_pages" else out

        return call


def test_endpoint_batches_concurrent_calls_and_answers_each():
    hosts = [host(f"h{i}", vcpu=8, ram=65536) for i in range(8)]
    fake = FakePlacement(hosts)
    conf = conf_mod.make_conf(overrides={("scheduler", "batch_size"): 16})
    locked = _Locked(fake)
    endpoint = service.SchedulerEndpoint(conf, lambda: locked)
    answers = {}
    wire = [spec_mod.dump_request_spec(spec(f"r{i}", vcpu=1 + i % 3)) for i in range(12)] + [
        spec_mod.dump_request_spec(spec("too-big", vcpu=99))
    ]

    def call(w):
        answers[w["request_id"]] = endpoint.select_destinations({}, w)

    threads = [threading.Thread(target=call, args=(w,)) for w in wire]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert answers["too-big"]["status"] == "no_valid_host"
    assert "placement returned no candidates" in answers["too-big"]["error"]
    placed = [a for r, a in answers.items() if r != "too-big"]
    assert [a["status"] for a in placed] == ["placed"] * 12
    instances = [a["selections"]["selections"][0][0]["instance_uuid"] for a in placed]
    assert len(set(instances)) == 12 and set(instances) == set(fake.consumers)
    for used in fake.used.values():
        assert used["VCPU"] <= 8


def test_reports_keep_the_configured_number_of_top_hosts_with_their_weights():
    hosts = [host(f"h{i}", vcpu=64, ram=10000 + i) for i in range(30)]
    fake, sched = make(hosts, report_top_hosts=20)
    sched.select_batch([spec("r0"), spec("r1")])
    top = fake.reports["r0"]["top_hosts"]
    assert len(top) == 20
    assert all(set(t["weights"]) >= {"RAMWeigher"} for t in top)
    assert [t["weight"] for t in top] == sorted((t["weight"] for t in top), reverse=True)


def test_batcher_many_callers_are_all_answered_and_wait_a_few_times_each():
    """128 callers (a worker's threads), batches of 8, two in flight and
    a gathering window: every caller gets its own outcome, and none is
    woken by every batch (a shared condition woke them all each time)."""
    lock = threading.Lock()
    sizes = []

    def run(specs, groups):
        with lock:
            sizes.append(len(specs))
        threading.Event().wait(0.002)
        return [(batching.PLACED, f"answer-{s}") for s in specs]

    batcher = batcher_mod.Batcher(run, size=8, window=0.002, slots=2)
    results = {}

    def call(n):
        results[n] = batcher.submit(f"s{n}")

    waits, all_returned = callers_at_once(128, call)
    assert all_returned, "a caller was never woken"
    assert results == {n: (batching.PLACED, f"answer-s{n}") for n in range(128)}
    assert sum(sizes) == 128 and max(sizes) <= 8
    assert max(waits.values()) <= 6, waits.most_common(3)
