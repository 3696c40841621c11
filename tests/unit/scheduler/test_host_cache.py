"""The walk a batching worker keeps between batches (scheduler.host_cache):
reused while fresh and right, dropped when a race shows it stale, never the
reason a request that fits is refused."""

import random
import types

from scheduler import batching
from scheduler import host_cache
from scheduler import worker
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host
from tests.unit.scheduler.test_batching import spec


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(hosts, seconds=10.0):
    """A worker on fake placement whose cache's background walks wait in
    ``sched.host_cache.pending`` until a test runs them."""
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(), fake, rng=random.Random(1))
    clock = Clock()
    pending = []
    sched.host_cache = host_cache.HostCache(seconds, clock=clock, background=pending.append)
    sched.host_cache.pending = pending
    return fake, sched, clock


def placed_on(outcomes):
    assert [k for k, _v in outcomes] == [batching.PLACED] * len(outcomes)
    return [sel.host_name for _k, [[sel, *_alts]] in outcomes]


def test_a_second_batch_of_the_same_kind_places_without_reading_placement():
    fake, sched, _clock = make([host(f"h{i}", vcpu=8, ram=65536) for i in range(4)])
    placed_on(sched.select_batch([spec("a1"), spec("a2")]))
    assert len(fake.queries) == 1
    placed_on(sched.select_batch([spec("b1", vcpu=4), spec("b2", vcpu=3)]))
    # No second walk; the claim is still checked by placement.
    assert len(fake.queries) == 1
    assert [c[0] for c in fake.calls if c[0] in ("POST", "PUT")] == ["POST", "POST"]
    assert fake.reports["b1"]["batch"]["cached_walk"] == {"age_s": 0.0, "batches": 1}
    assert "cached_walk" not in fake.reports["a1"]["batch"]
    assert sched.host_cache.stats["hits"] == 1


def test_the_kept_walk_remembers_what_earlier_batches_took():
    # 2 hosts of 4 VCPU: batches of 2 VCPU fill them exactly, over four
    # batches, on one walk, and never plan a claim placement would refuse.
    fake, sched, _clock = make([host("a", vcpu=4, ram=65536), host("b", vcpu=4, ram=65536)])
    names = []
    for n in range(4):
        names += placed_on(sched.select_batch([spec(f"r{n}")]))
    assert sorted(names) == ["a", "a", "b", "b"]
    assert len(fake.queries) == 1
    assert sched.stats["races_lost"] == 0
    # Full: the cached view sends the fifth alone, whose fresh walk finds nothing.
    [(kind, _v)] = sched.select_batch([spec("r5")])
    assert kind == batching.ALONE


def test_an_entry_expires_after_host_cache_seconds():
    fake, sched, clock = make([host("a", vcpu=64, ram=65536)], seconds=5)
    placed_on(sched.select_batch([spec("r1")]))
    clock.now += 4.4  # before REFRESH_AT of its life: nothing read again
    placed_on(sched.select_batch([spec("r2")]))
    assert len(fake.queries) == 1
    clock.now += 0.7  # 5.1 s after the walk
    placed_on(sched.select_batch([spec("r3")]))
    assert len(fake.queries) == 2


def test_a_lost_race_drops_the_walk():
    fake, sched, _clock = make([host("a", vcpu=64, ram=65536), host("b", vcpu=64, ram=65536)])
    [name] = placed_on(sched.select_batch([spec("r1")]))
    # Another worker fills the host our view would pick next: our batch
    # claim loses, the request goes alone (fresh walk), and the kept walk
    # is gone, so the batch after reads placement again.
    fake.steal = {h for h, v in fake.hosts.items()}
    outcomes = sched.select_batch([spec("r2")])
    assert outcomes == [(batching.ALONE, None)]
    assert sched.stats["races_lost"] == 1
    walks = len(fake.queries)
    fake.steal = set()
    for rp in fake.used:
        for rc in fake.used[rp]:
            fake.used[rp][rc] = 0
    placed_on(sched.select_batch([spec("r3")]))
    assert len(fake.queries) == walks + 1
    assert name in ("a", "b")


def test_smaller_amounts_than_the_walk_asked_for_walk_again():
    # A host with 3 free VCPU was left out of a walk for 4; a request for 2
    # must see it, so it does not reuse that walk.
    fake, sched, _clock = make([host("small", vcpu=3, ram=65536), host("big", vcpu=64, ram=65536)])
    assert placed_on(sched.select_batch([spec("r1", vcpu=4)])) == ["big"]
    assert ("resources", "MEMORY_MB:1024,VCPU:4") in fake.queries[0][0]
    placed_on(sched.select_batch([spec("r2", vcpu=2)]))
    assert len(fake.queries) == 2
    # Larger amounts reuse the newer (smaller-amount) walk.
    placed_on(sched.select_batch([spec("r3", vcpu=5)]))
    assert len(fake.queries) == 2


def test_different_kinds_keep_different_walks():
    fake, sched, _clock = make(
        [host("p1", vcpu=64, ram=1 << 20), host("e1", klass="eco", vcpu=64, ram=1 << 20)]
    )
    sched.select_batch([spec("a", workload_class="performance"), spec("b")])
    assert len(fake.queries) == 2
    outcomes = sched.select_batch([spec("c", workload_class="performance"), spec("d")])
    assert len(fake.queries) == 2
    assert placed_on(outcomes)[0] == "p1"  # the performance walk, not the standard one


def test_zero_seconds_walks_every_batch():
    fake, sched, _clock = make([host("a", vcpu=64, ram=65536)], seconds=0)
    for n in range(3):
        placed_on(sched.select_batch([spec(f"r{n}")]))
    assert len(fake.queries) == 3
    assert sched.host_cache.stats == {
        "hits": 0,
        "misses": 0,
        "dropped": 0,
        "foreign_claims": 0,
        "refreshes": 0,
    }


def test_the_service_shares_one_cache_between_its_threads_and_turns_it_off_without_batching():
    from scheduler import conf as conf_mod
    from scheduler import service

    conf = conf_mod.make_conf(overrides={("scheduler", "host_cache_seconds"): 7.5})
    endpoint = service.SchedulerEndpoint(conf, lambda: FakePlacement([]))
    assert endpoint.host_cache.seconds == 7.5
    assert endpoint._scheduler().host_cache is endpoint.host_cache
    conf = conf_mod.make_conf(
        overrides={("scheduler", "batch_size"): 1, ("scheduler", "host_cache_seconds"): 7.5}
    )
    assert not service.SchedulerEndpoint(conf, lambda: FakePlacement([])).host_cache.enabled


def test_a_new_walk_asks_for_the_smallest_amounts_seen_for_its_kind():
    fake, sched, clock = make([host("a", vcpu=64, ram=65536)], seconds=5)
    placed_on(sched.select_batch([spec("r1", vcpu=4)]))
    placed_on(sched.select_batch([spec("r2", vcpu=2, ram=2048)]))
    assert ("resources", "MEMORY_MB:1024,VCPU:2") in fake.queries[1][0]
    clock.now += 6  # expired: the next walk still asks for the smallest seen
    [(_k, [[sel, *_alts]])] = sched.select_batch([spec("r3", vcpu=6, ram=4096)])
    assert len(fake.queries) == 3
    assert ("resources", "MEMORY_MB:1024,VCPU:2") in fake.queries[2][0]
    # ... and each request still gets exactly its own amounts.
    held = fake.consumers[sel.instance_uuid]["allocations"]
    assert list(held.values()) == [{"VCPU": 6, "MEMORY_MB": 4096}]


def test_a_concurrent_batch_of_the_same_kind_waits_for_the_walk_instead_of_walking():
    import threading

    fake, sched, _clock = make([host(f"h{i}", vcpu=64, ram=65536) for i in range(4)])
    cache = sched.host_cache
    key = batching.group_key(spec("x"))
    resources = dict(spec("x").resources)
    assert cache.take(key, resources) is None  # this thread walks...
    got = []
    other = threading.Thread(target=lambda: got.append(sched.select_batch([spec("w")])))
    other.start()
    other.join(0.3)
    assert other.is_alive()  # ...the other batch waits for it
    assert fake.queries == []
    cache.put(key, None)  # the walk failed: released, nothing kept
    other.join(5)
    assert not other.is_alive()
    assert placed_on(got[0]) and len(fake.queries) == 1


def test_a_kept_walk_reads_every_page_whatever_max_placement_results_says():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(12)]
    for seconds, read in ((10.0, 12), (0, 4)):
        fake = FakePlacement(hosts)
        sched = worker.Scheduler(
            make_conf(max_placement_results=4, page_size=4), fake, rng=random.Random(1)
        )
        sched.host_cache = host_cache.HostCache(seconds, clock=Clock())
        placed_on(sched.select_batch([spec("r1")]))
        assert fake.reports["r1"]["hosts_seen"] == read, seconds


def test_a_walk_that_shows_other_workers_claiming_is_kept_a_quarter_as_long():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(20)]
    fake, alone, clock = make(hosts, seconds=8)
    placed_on(alone.select_batch([spec("a1")]))
    clock.now += 9
    placed_on(alone.select_batch([spec("a2")]))
    # Only its own claims since: the new walk is kept the whole 8 s.
    key = batching.group_key(spec("x"))
    assert alone.host_cache.life(alone.host_cache._entries[key]) == 8
    # Another worker (its own view, the same placement) claims meanwhile.
    other = worker.Scheduler(make_conf(), fake, rng=random.Random(2))
    other.host_cache = host_cache.HostCache(8, clock=clock)
    placed_on(other.select_batch([spec(f"b{i}") for i in range(3)]))
    clock.now += 9
    placed_on(alone.select_batch([spec("a3")]))
    assert alone.host_cache.life(alone.host_cache._entries[key]) == 2
    clock.now += 2.1
    placed_on(alone.select_batch([spec("a4")]))
    assert len(fake.queries) == 5  # a1, a2, b, a3, a4: expired after 2 s


def test_hosts_whose_node_data_changed_drop_the_walks_holding_them():
    fake, sched, _clock = make([host(f"h{i}", vcpu=64, ram=65536) for i in range(3)])
    cache = sched.host_cache
    placed_on(sched.select_batch([spec("r1")]))
    placed_on(sched.select_batch([spec("p1", workload_class="performance")]))
    assert len(cache._entries) == 2
    cache.forget_hosts({"no-such-host"})
    assert len(cache._entries) == 2
    h0 = next(iter(fake.hosts))
    cache.forget_hosts({h0})
    assert cache._entries == {}
    # A walk a batch holds while the news arrives is not kept either.
    key = batching.group_key(spec("x"))
    assert cache.take(key, dict(spec("x").resources)) is None  # held by this batch
    cache.forget_hosts({h0})
    walk = types.SimpleNamespace(passed=[])
    ranker = types.SimpleNamespace(index={})
    entry = host_cache.Entry(walk, ranker, {}, dict(spec("x").resources), cache.clock())
    cache.put(key, entry)
    assert cache._entries == {}
    # The next batch holds and keeps as usual.
    placed_on(sched.select_batch([spec("r3")]))
    assert key in cache._entries


def _uuid(fake, name):
    return next(u for u, h in fake.hosts.items() if h["name"] == name)


def _claim(fake, name, vcpu):
    """Another worker's claim of ``vcpu`` on host ``name``, made in
    placement and in its wire form (scheduler.claim_feed)."""
    uuid = _uuid(fake, name)
    fake.used[uuid]["VCPU"] += vcpu
    return [uuid, {uuid: {"VCPU": vcpu}}]


def test_another_workers_claims_move_the_hosts_of_a_kept_walk():
    fake, sched, _clock = make([host("a", vcpu=8, ram=65536), host("b", vcpu=8, ram=65536)])
    [first] = placed_on(sched.select_batch([spec("r1")]))
    other = "b" if first == "a" else "a"
    # The other worker fills the host this one would pick next.
    sched.host_cache.apply_claims([_claim(fake, other, 8)], sender="w2")
    assert placed_on(sched.select_batch([spec("r2")])) == [first]
    assert len(fake.queries) == 1  # the kept walk, no race lost on it
    assert sched.stats["races_lost"] == 0
    assert sched.host_cache.stats["foreign_claims"] == 1


def test_claims_that_arrive_while_a_batch_holds_the_walk_are_added_when_it_is_put_back():
    fake, sched, _clock = make([host("a", vcpu=8, ram=65536), host("b", vcpu=8, ram=65536)])
    cache = sched.host_cache
    placed_on(sched.select_batch([spec("r1")]))
    key = batching.group_key(spec("x"))
    entry = cache.take(key, dict(spec("x").resources))  # a batch holds it
    claim = _claim(fake, "a", 3)
    cache.apply_claims([claim], sender="w2")
    a = entry.ranker.hosts[entry.ranker.index[claim[0]]]
    used_before = a.providers[claim[0]]["VCPU"][1]
    cache.put(key, entry)
    assert a.providers[claim[0]]["VCPU"][1] == used_before + 3
    # A walk that is dropped instead takes nothing later.
    entry = cache.take(key, dict(spec("x").resources))
    cache.apply_claims([_claim(fake, "a", 1)], sender="w2")
    cache.put(key, entry, keep=False)
    assert cache._foreign == {}


def test_with_the_others_claims_fed_a_new_walk_is_kept_for_every_live_worker():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(20)]
    fake, mine, clock = make(hosts, seconds=8)
    placed_on(mine.select_batch([spec("a1")]))
    # The other worker claims on three hosts and says so.
    mine.host_cache.apply_claims([_claim(fake, f"h{i}", 2) for i in range(3)], sender="w2")
    clock.now += 9
    placed_on(mine.select_batch([spec("a2")]))
    key = batching.group_key(spec("x"))
    # Not a quarter (2 s, as without the feed: above) but twice the 8 s:
    # two workers read each kind, each half as often.
    assert mine.host_cache.life(mine.host_cache._entries[key]) == 16
    assert mine.host_cache.workers() == 2
    # A worker not heard from for PEER_SECONDS no longer counts.
    clock.now += host_cache.PEER_SECONDS + 1
    assert mine.host_cache.workers() == 1


def test_a_walk_read_before_any_other_worker_was_heard_lives_longer_once_one_is():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(20)]
    fake, mine, clock = make(hosts, seconds=8)
    placed_on(mine.select_batch([spec("a1")]))  # alone: 8 s
    key = batching.group_key(spec("x"))
    entry = mine.host_cache._entries[key]
    assert mine.host_cache.life(entry) == 8
    # A second worker starts claiming: the walk already kept now lives 16 s.
    mine.host_cache.apply_claims([_claim(fake, "h1", 2)], sender="w2")
    assert mine.host_cache.life(entry) == 16
    clock.now += 9
    placed_on(mine.select_batch([spec("a2")]))
    assert len(fake.queries) == 1  # no second walk at 9 s
    # The other worker falls silent: after PEER_SECONDS a walk is kept for
    # this worker alone again.
    clock.now += host_cache.PEER_SECONDS
    assert mine.host_cache.life(mine.host_cache._entries[key]) == 8


def test_claims_unknown_to_a_walk_change_nothing():
    fake, sched, _clock = make([host("a", vcpu=8, ram=65536)])
    placed_on(sched.select_batch([spec("r1")]))
    [entry] = sched.host_cache._entries.values()
    before = [dict(h.providers) for h in entry.ranker.hosts]
    sched.host_cache.apply_claims([["no-such-host", {"no-such-host": {"VCPU": 4}}]], sender="w2")
    u = _uuid(fake, "a")
    sched.host_cache.apply_claims(
        [
            [
                u,
                {"another-provider": {"VCPU": 4}},
            ]
        ]
    )
    sched.host_cache.apply_claims([[u, {u: {"CUSTOM_UNKNOWN": 4}}]], sender="w2")
    assert [dict(h.providers) for h in entry.ranker.hosts] == before


def test_the_walks_of_one_workers_kinds_show_each_others_claims():
    fake, sched, _clock = make([host(f"h{i}", vcpu=16, ram=65536) for i in range(3)])
    for n in range(6):
        placed_on(sched.select_batch([spec(f"r{n}")]))
        placed_on(sched.select_batch([spec(f"p{n}", vcpu=1, workload_class="performance")]))
    entries = sched.host_cache._entries
    assert len(entries) == 2
    assert len(fake.queries) == 2  # one walk per kind, no race lost
    for entry in entries.values():
        for h in entry.ranker.hosts:
            assert h.providers[h.uuid]["VCPU"][1] == fake.used[h.uuid]["VCPU"], h.name


def test_with_other_workers_feeding_a_lost_race_places_again_on_the_kept_walk():
    fake, sched, _clock = make([host(f"h{i}", vcpu=8, ram=65536) for i in range(2)])
    cache = sched.host_cache
    [first] = placed_on(sched.select_batch([spec("r1")]))
    assert cache.workers() == 1
    # An empty message is a worker saying it is there (scheduler.claim_feed).
    assert cache.apply_claims([], sender="w2") is True  # heard for the first time
    assert cache.workers() == 2
    assert cache.apply_claims([_claim(fake, first, 0)], sender="w2") is False
    # The other worker fills the other host, which our view picks next
    # (the emptiest), its message still on the way: our claim loses, and
    # the request is placed again on the same view, on the first host.
    fake.steal = {u for u, h in fake.hosts.items() if h["name"] != first}
    walks = len(fake.queries)
    assert placed_on(sched.select_batch([spec("r2")])) == [first]
    assert sched.stats["races_lost"] == 1
    assert sched.stats["replaced_after_race"] == 1
    assert len(fake.queries) == walks  # no walk, not even alone
    key = batching.group_key(spec("x"))
    assert key in cache._entries  # kept
    # The view gave back what the lost pick assumed: the host it lost on is
    # as it was, until the other worker's message says what it took.
    [entry] = cache._entries.values()
    lost = [h for h in entry.ranker.hosts if h.name != first]
    assert sum(h.providers[h.uuid]["VCPU"][1] for h in lost) == 0


def test_live_workers_prefer_disjoint_shares_of_the_hosts():
    uuids = [f"host-{n}" for n in range(2000)]
    caches = {}
    for me in ("w-a", "w-b", "w-c"):
        cache = host_cache.HostCache(10, clock=Clock())
        cache.owner_id = me
        assert cache.preference() is None  # alone: no preference
        caches[me] = cache
    for me, cache in caches.items():
        for other in caches:
            if other != me:
                cache.apply_claims([], sender=other)
                cache.apply_claims([["h", {"h": {"VCPU": 0}}]], sender=other)
    shares = {me: cache.preference() for me, cache in caches.items()}
    owners = [[me for me in shares if shares[me](u)] for u in uuids]
    assert all(len(o) == 1 for o in owners)  # each host is one worker's
    counts = {me: sum(o == [me] for o in owners) for me in shares}
    assert all(550 < c < 780 for c in counts.values()), counts
    # A worker that leaves moves only the hosts it held.
    gone = caches["w-c"]
    before = {u: owners[i][0] for i, u in enumerate(uuids)}
    caches["w-a"]._peers.pop("w-c")
    after = caches["w-a"].preference()
    assert all(after(u) for u in uuids if before[u] == "w-a")
    assert gone.preference() is shares["w-c"]  # unchanged workers, same share


def test_a_worker_draws_its_share_of_tied_hosts_first():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(200)]
    fake, sched, _clock = make(hosts)
    cache = sched.host_cache
    cache.owner_id = "w-a"
    cache.apply_claims([["x", {"x": {"VCPU": 0}}]], sender="w-b")
    share = cache.preference()
    # 200 identical hosts tie: every pick of this worker is in its share.
    names = placed_on(sched.select_batch([spec(f"r{n}") for n in range(40)]))
    by_name = {h["name"]: u for u, h in fake.hosts.items()}
    assert all(share(by_name[n]) for n in names)
    assert len(set(names)) == 40


def _sharing_worker(hosts):
    fake, sched, _clock = make(hosts)
    cache = sched.host_cache
    cache.owner_id = "w-a"
    cache.apply_claims([["x", {"x": {"VCPU": 0}}]], sender="w-b")
    by_name = {h["name"]: u for u, h in fake.hosts.items()}
    return sched, cache.preference(), by_name


def test_a_worker_takes_a_host_of_its_share_within_a_near_tie_of_the_best():
    # Free RAM 64 MiB apart over 200 hosts: neighbours are 1/199 of the
    # RAM weigher's range apart, so the best three are within NEAR_TIE.
    hosts = [host(f"h{i}", vcpu=64, ram=65536 + 64 * i) for i in range(200)]
    sched, share, by_name = _sharing_worker(hosts)
    [name] = placed_on(sched.select_batch([spec("r1")]))
    near = [f"h{i}" for i in (199, 198, 197)]
    mine = [n for n in near if share(by_name[n])]
    assert name == (mine[0] if mine else "h199")
    # Twenty picks, each the best or a near one: never further down.
    names = placed_on(sched.select_batch([spec(f"s{n}") for n in range(20)]))
    assert all(int(n[1:]) >= 170 for n in names)


def test_a_clearly_better_host_outside_the_share_is_still_taken():
    # A tenth of the RAM weigher's range apart: no near tie.
    hosts = [host(f"h{i}", vcpu=64, ram=65536 * (1 + i)) for i in range(10)]
    sched, share, by_name = _sharing_worker(hosts)
    assert placed_on(sched.select_batch([spec("r1")])) == ["h9"]


def _used(entry, fake, name):
    uuid = _uuid(fake, name)
    return entry.ranker.hosts[entry.ranker.index[uuid]].providers[uuid]["VCPU"][1]


def test_a_walk_near_the_end_of_its_life_is_read_again_beside_the_batches():
    # Under a steady stream no batch waits for a walk of its kind: the one
    # that takes the kept walk past REFRESH_AT of its life places on it and
    # has the kind read again beside it; the old walk serves meanwhile (up
    # to REFRESH_GRACE of its life) and the new one replaces it.
    fake, sched, clock = make([host(f"h{i}", vcpu=64, ram=65536) for i in range(3)], seconds=10)
    cache = sched.host_cache
    placed_on(sched.select_batch([spec("r1")]))
    clock.now += 8.9
    placed_on(sched.select_batch([spec("r2")]))
    assert cache.pending == [] and len(fake.queries) == 1
    clock.now += 0.2  # 9.1 s: past nine tenths of 10
    placed_on(sched.select_batch([spec("r3")]))
    assert len(fake.queries) == 1  # r3 did not wait for a walk
    [read] = cache.pending
    cache.pending.clear()
    clock.now += 3  # 12.1 s: past its life, but its kind is being read again
    placed_on(sched.select_batch([spec("r4")]))
    assert len(fake.queries) == 1 and cache.pending == []
    read()
    assert len(fake.queries) == 2 and cache.stats["refreshes"] == 1
    clock.now += 5  # 17.1 s after the first walk, 5 after the second
    placed_on(sched.select_batch([spec("r5")]))
    assert len(fake.queries) == 2 and cache.pending == []
    assert fake.reports["r5"]["batch"]["cached_walk"]["age_s"] == 5.0
    clock.now += 4.5  # 9.5 s: due again, once
    placed_on(sched.select_batch([spec("r6")]))
    placed_on(sched.select_batch([spec("r7")]))
    assert len(cache.pending) == 1
    # A walk read again for too long (past REFRESH_GRACE of the old one's
    # life) no longer holds the batches back from a walk of their own.
    clock.now += 5.6  # 15.1 s
    placed_on(sched.select_batch([spec("r8")]))
    assert len(fake.queries) == 3


def test_the_new_walk_gets_every_claim_made_while_it_was_read():
    fake, sched, clock = make([host("a", vcpu=8, ram=65536), host("b", vcpu=8, ram=65536)])
    cache = sched.host_cache
    placed_on(sched.select_batch([spec("r1")]))
    key = batching.group_key(spec("x"))
    clock.now += 9.5
    old = cache.take(key, dict(spec("x").resources))
    token = cache.refresh_due(key, old)
    assert token is not None and cache.refresh_due(key, old) is None  # one at a time
    new, _data = batching._walk(sched, spec("x"), dict(old.resources), cache)
    new = host_cache.Entry(new.walk, new.ranker, {}, dict(old.resources), clock())
    read_a = _used(new, fake, "a")
    # Placement changes after the new walk read its pages: another worker's
    # claim, and the holding batch's own (its kind: skipped for its walk).
    cache.apply_claims([_claim(fake, "a", 3)], sender="w2")
    cache.apply_claims([[_uuid(fake, "a"), {_uuid(fake, "a"): {"VCPU": 1}}]], skip=key)
    cache.refreshed(key, token, new)
    assert _used(new, fake, "a") == read_a + 4
    # Read while the batch held the kind: it replaces the batch's walk when
    # the batch puts it back, and what came meanwhile was added to it.
    cache.apply_claims([[_uuid(fake, "a"), {_uuid(fake, "a"): {"VCPU": 2}}]], skip=key)
    assert _used(new, fake, "a") == read_a + 6
    cache.put(key, old)
    assert cache.take(key, dict(spec("x").resources)) is new
    cache.put(key, new)


def test_a_background_walk_that_fails_or_was_overtaken_changes_nothing():
    fake, sched, clock = make([host(f"h{i}", vcpu=64, ram=65536) for i in range(2)])
    cache = sched.host_cache
    placed_on(sched.select_batch([spec("r1")]))
    key = batching.group_key(spec("x"))
    clock.now += 9.5
    old = cache.take(key, dict(spec("x").resources))
    cache.put(key, old)
    token = cache.refresh_due(key, old)
    cache.refreshed(key, token, None)  # the walk failed: the kept one serves on
    assert cache._entries[key] is old
    # Hosts whose node data changed while a walk was read: it is not kept.
    token = cache.refresh_due(key, old)
    assert token is not None
    walk, _data = batching._walk(sched, spec("x"), dict(old.resources), cache)
    new = host_cache.Entry(walk.walk, walk.ranker, {}, dict(old.resources), clock())
    cache.forget_hosts({_uuid(fake, "h0")})
    cache.refreshed(key, token, new)
    assert key not in cache._entries


def test_a_worker_reads_its_kinds_again_in_threads_of_their_own():
    # The service's cache runs a background walk in a thread: the batch
    # that started it answers without waiting for it.
    import threading

    fake, sched, clock = make([host(f"h{i}", vcpu=64, ram=65536) for i in range(2)])
    started = threading.Event()
    release = threading.Event()
    real = fake.candidate_pages

    def slow_pages(*args, **kwargs):
        if started.is_set():
            release.wait(10)
        return real(*args, **kwargs)

    sched.host_cache.background = host_cache._in_a_thread
    placed_on(sched.select_batch([spec("r1")]))
    fake.candidate_pages = slow_pages
    started.set()
    clock.now += 9.5
    placed_on(sched.select_batch([spec("r2")]))
    assert sched.host_cache._refreshing != {}  # answered while the walk waits
    release.set()
    for _ in range(200):
        if sched.host_cache._refreshing == {}:
            break
        threading.Event().wait(0.02)
    assert sched.host_cache._refreshing == {}
    assert sched.host_cache._entries[batching.group_key(spec("x"))].born == clock.now
