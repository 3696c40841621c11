"""select_destinations over a fake placement: claims, races, alternates, failures."""

import random

import pytest

from joule import placement_client as client_mod
from scheduler import worker
from tests import specs
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host

spec = specs.spec_builder(resources={"VCPU": 2, "MEMORY_MB": 1024}, project_id="p", user_id="u")


def make(hosts, rng=None, **conf):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(**conf), fake, rng=rng)
    return fake, sched


def test_performance_never_on_eco_or_draining_and_standard_prefers_eco():
    hosts = [host("p1"), host("e1", klass="eco"), host("d1", klass="draining")]
    fake, sched = make(hosts)
    for _ in range(3):
        [[sel, *_alts]] = sched.select_destinations(spec(workload_class="performance"))
        assert sel.host_name == "p1" and sel.claimed
    [[sel, *_]] = sched.select_destinations(spec(workload_class="standard"))
    assert sel.host_name in ("e1", "d1")


def test_alternates_same_cell_own_requests_unclaimed():
    hosts = [host(f"a{i}", cell="A", ram=8192 + i) for i in range(4)] + [
        host(f"b{i}", cell="B", ram=100000) for i in range(3)
    ]
    fake, sched = make(hosts, max_attempts=3)
    [[sel, *alts]] = sched.select_destinations(spec())
    # The B hosts have the most RAM, so the selected one is in B.
    assert sel.cell == "B"
    assert len(alts) == 2
    assert all(a.cell == sel.cell and not a.claimed for a in alts)
    assert len({a.host_uuid for a in alts} | {sel.host_uuid}) == 3
    for a in alts:
        assert list(a.allocation_request["allocations"]) == [a.host_uuid]
    # Only the selected host holds an allocation.
    assert fake.holder_of(sel.instance_uuid) == [sel.host_uuid]


def test_max_attempts_one_means_no_alternates():
    fake, sched = make([host("a"), host("b")], max_attempts=1)
    [[_sel, *alts]] = sched.select_destinations(spec())
    assert alts == []


def test_lost_race_drops_the_host_and_claims_the_next():
    hosts = [host("best", ram=99999), host("next", ram=50000), host("other", ram=10000)]
    fake, sched = make(hosts)
    fake.steal.add(hosts[0]["uuid"])
    [[sel, *alts]] = sched.select_destinations(spec(request_id="req-race"))
    assert sel.host_name == "next"
    assert hosts[0]["uuid"] not in [a.host_uuid for a in alts]
    report = fake.reports["req-race"]
    assert report["races_lost"] == 1 and report["result"] == "placed"
    assert sched.stats["races_lost"] == 1


def test_all_races_lost_is_no_valid_host_and_nothing_held():
    hosts = [host("a"), host("b")]
    fake, sched = make(hosts)
    fake.steal.update(h["uuid"] for h in hosts)
    with pytest.raises(worker.NoValidHost, match="2 race"):
        sched.select_destinations(spec())
    assert fake.consumers == {}


def test_host_turned_eco_after_the_walk_is_a_lost_race_for_performance():
    """Placement refuses performance work on a host the power controller made
    eco between the walk and the claim: drop the host, claim the next."""
    hosts = [host("best", ram=99999), host("next", ram=50000), host("other", ram=10000)]
    fake, sched = make(hosts)
    fake.flip_to_eco.add(hosts[0]["uuid"])
    [[sel, *alts]] = sched.select_destinations(
        spec(request_id="req-eco", workload_class="performance")
    )
    assert sel.host_name == "next"
    assert hosts[0]["uuid"] not in [a.host_uuid for a in alts]
    assert fake.holder_of(sel.instance_uuid) == [hosts[1]["uuid"]]
    report = fake.reports["req-eco"]
    assert report["profile_refusals"] == 1 and report["races_lost"] == 1
    assert report["result"] == "placed"


def test_host_turned_eco_still_takes_standard_work():
    hosts = [host("best", klass="eco", ram=99999), host("next", klass="eco", ram=50000)]
    fake, sched = make(hosts)
    fake.flip_to_eco.add(hosts[0]["uuid"])
    [[sel, *_]] = sched.select_destinations(spec(request_id="req-std", workload_class="standard"))
    assert sel.host_name == "best"
    assert "profile_refusals" not in fake.reports["req-std"]


def test_every_host_turned_eco_is_no_valid_host_that_says_so():
    hosts = [host("a"), host("b")]
    fake, sched = make(hosts)
    fake.flip_to_eco.update(h["uuid"] for h in hosts)
    with pytest.raises(worker.NoValidHost, match="2 of them refused by placement because the host"):
        sched.select_destinations(spec(workload_class="performance"))
    assert fake.consumers == {}


def test_multi_instance_spreads_and_releases_all_when_one_cannot_fit():
    # Two hosts with room for exactly one instance each.
    hosts = [host("a", vcpu=2), host("b", vcpu=2)]
    fake, sched = make(hosts)
    out = sched.select_destinations(spec(num_instances=2))
    assert sorted(sel.host_name for sel, *_ in out) == ["a", "b"]
    # A third instance cannot fit: the earlier claims of that request are released.
    fake2, sched2 = make([host("a", vcpu=4), host("b", vcpu=2)])
    with pytest.raises(worker.NoValidHost, match="could place 3 of 4"):
        sched2.select_destinations(spec(num_instances=4, request_id="req-big"))
    assert fake2.consumers == {}
    # Unwound newest first.
    deletes = [c for op, c in fake2.calls if op == "DELETE"]
    puts = [c for op, c in fake2.calls if op == "PUT"]
    assert deletes == list(reversed(puts))
    assert fake2.reports["req-big"]["result"] == "no_valid_host"


def test_no_valid_host_explains_each_filter():
    hosts = [
        host("e1", klass="eco"),
        host("e2", klass="draining"),
        host("u", unschedulable=True),
        host("x", cell="other"),
    ]
    fake, sched = make(hosts)
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(
            spec(workload_class="performance", cell="cell1", request_id="req-none")
        )
    msg = str(err.value)
    # Eco and draining hosts never reach the scheduler: placement leaves them
    # out for the JoulieFilter, and the explanation says so.
    assert (
        "JoulieFilter had placement leave out hosts with CUSTOM_POWER_PROFILE_ECO "
        "(performance work is not placed on eco or draining hosts)"
    ) in msg
    assert "placement returned 2 candidate host(s)" in msg
    assert "ComputeFilter removed 1 (host is marked unschedulable)" in msg
    assert "CellFilter removed 1 (host is not in the requested cell)" in msg
    report = fake.reports["req-none"]
    assert report["removed_per_filter"] == {
        "ComputeFilter": 1,
        "ForceHostsFilter": 0,
        "CellFilter": 1,
    }
    assert report["placement_excluded"] == [
        "JoulieFilter had placement leave out hosts with CUSTOM_POWER_PROFILE_ECO "
        "(performance work is not placed on eco or draining hosts)"
    ]
    # Without the JoulieFilter nothing is left out, and the filter's words go;
    # placement itself still refuses the performance claims on the eco hosts.
    fake, sched = make(hosts, enabled_filters=["ComputeFilter", "CellFilter"])
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(spec(workload_class="performance", cell="cell1"))
    assert "JoulieFilter" not in str(err.value)
    assert "2 of them refused by placement because the host is eco now" in str(err.value)
    assert all(
        "CUSTOM_POWER_PROFILE_ECO" not in dict(q).get("root_required", "")
        for q, _nd, _s in fake.queries
    )
    assert fake.consumers == {}


def test_no_candidates_at_all_names_the_query():
    fake, sched = make([host("tiny", vcpu=1)])
    with pytest.raises(
        worker.NoValidHost,
        match="placement returned no candidates for resources=MEMORY_MB:1024,VCPU:2",
    ):
        sched.select_destinations(spec())


def test_walks_every_page_and_reports_it():
    hosts = [host(f"h{i}") for i in range(7)]
    fake, sched = make(hosts, page_size=3)
    sched.select_destinations(spec(request_id="req-pages"))
    report = fake.reports["req-pages"]
    assert report["pages_fetched"] == 3
    assert report["candidates_seen"] == 7 and report["hosts_seen"] == 7
    assert len(report["top_hosts"]) == 5


def test_ties_are_shuffled_so_workers_spread():
    hosts = [host(f"h{i}") for i in range(6)]  # all identical: one big tie
    chosen = set()
    for seed in range(30):
        fake, sched = make(hosts, rng=random.Random(seed))
        [[sel, *_]] = sched.select_destinations(spec())
        chosen.add(sel.host_name)
    assert len(chosen) > 1
    # Without shuffling and subset 1, the first best host always wins.
    chosen = set()
    for seed in range(10):
        fake, sched = make(
            hosts,
            rng=random.Random(seed),
            shuffle_best_same_weighed_hosts=False,
            random_walk_start=False,
        )
        [[sel, *_]] = sched.select_destinations(spec())
        chosen.add(sel.host_name)
    assert chosen == {"h0"}


def test_host_subset_size_picks_among_the_best():
    hosts = [host(f"h{i}", ram=1000 * (i + 2)) for i in range(6)]
    chosen = set()
    for seed in range(40):
        fake, sched = make(hosts, rng=random.Random(seed), host_subset_size=2)
        [[sel, *_]] = sched.select_destinations(spec())
        chosen.add(sel.host_name)
    assert chosen == {"h5", "h4"}


def test_consumer_already_holding_allocations_is_an_error_not_a_race():
    fake, sched = make([host("a"), host("b")])
    [[sel, *_]] = sched.select_destinations(spec())
    with pytest.raises(worker.SchedulerError, match="already holds allocations"):
        sched.select_destinations(spec(instance_uuids=[sel.instance_uuid]))
    assert fake.holder_of(sel.instance_uuid) == [sel.host_uuid]


class Unreachable(FakePlacement):
    """Placement goes away after ``ok_claims`` claims (the claim may have landed)."""

    def __init__(self, hosts, ok_claims):
        super().__init__(hosts)
        self.ok_claims = ok_claims

    def put_allocations(self, consumer, *args, **kwargs):
        if self.ok_claims == 0:
            # Written, but the answer is lost: the worst case for the caller.
            super().put_allocations(consumer, *args, **kwargs)
            raise client_mod.PlacementUnreachable(
                "PUT", "/allocations/x", "http://x", "connection dropped"
            )
        self.ok_claims -= 1
        return super().put_allocations(consumer, *args, **kwargs)


def test_outage_mid_claim_leaves_no_half_made_claim():
    fake = Unreachable([host(f"h{i}") for i in range(4)], ok_claims=1)
    sched = worker.Scheduler(make_conf(), fake)
    with pytest.raises(worker.SchedulerError, match="unreachable"):
        sched.select_destinations(spec(num_instances=3))
    assert fake.consumers == {}


def test_alternates_exclude_every_host_selected_for_the_request():
    hosts = [host(f"h{i}", ram=10000 * (5 - i)) for i in range(4)]
    fake, sched = make(hosts, max_attempts=4)
    out = sched.select_destinations(spec(num_instances=2))
    selected = {hl[0].host_uuid for hl in out}
    assert len(selected) == 2
    for _sel, *alts in out:
        assert selected.isdisjoint(a.host_uuid for a in alts)
        assert len(alts) == 2


def test_max_placement_results_stops_the_walk_early():
    hosts = [host(f"h{i}") for i in range(10)]
    fake, sched = make(
        hosts, page_size=100, max_placement_results=4, max_attempts=2, random_walk_start=False
    )
    [[sel, *alts]] = sched.select_destinations(spec(request_id="req-cap"))
    report = fake.reports["req-cap"]
    # page_size is capped too: one page of 4 roots, and nothing more is read.
    assert report["pages_fetched"] == 1 and fake.pages_served == 1
    assert report["hosts_seen"] == 4
    assert sel.host_name in {"h0", "h1", "h2", "h3"} and len(alts) == 1
    # From a random start the window moves: another 4 consecutive hosts (wrapping).
    fake, sched = make(
        hosts, rng=random.Random(3), page_size=100, max_placement_results=4, max_attempts=2
    )
    [[sel, *alts]] = sched.select_destinations(spec(request_id="req-cap"))
    [(_query, _node_data, start)] = fake.queries
    at = int(float(start) * 10)
    window = {f"h{(at + i) % 10}" for i in range(4)}
    assert at != 0 and sel.host_name in window


def test_max_placement_results_zero_walks_every_page():
    hosts = [host(f"h{i}") for i in range(10)]
    fake, sched = make(hosts, page_size=3, max_placement_results=0)
    sched.select_destinations(spec(request_id="req-all"))
    assert fake.reports["req-all"]["pages_fetched"] == 4
    assert fake.reports["req-all"]["hosts_seen"] == 10


def test_capped_walk_reads_on_when_filters_leave_too_few():
    # The first pages hold only eco hosts: a performance request reads on
    # until enough hosts pass the filters, instead of failing.
    hosts = [host(f"l{i}", labels={"rack": "a"}) for i in range(6)] + [
        host("p0", labels={"rack": "b"}),
        host("p1", labels={"rack": "b"}),
    ]
    fake, sched = make(
        hosts, page_size=2, max_placement_results=2, max_attempts=1, random_walk_start=False
    )
    [[sel]] = sched.select_destinations(spec(node_selector={"rack": "b"}, request_id="req-sel"))
    assert sel.host_name in ("p0", "p1")
    report = fake.reports["req-sel"]
    assert report["pages_fetched"] == 4 and report["hosts_seen"] == 8
    assert report["removed_per_filter"]["NodeSelectorFilter"] == 6
    # Nothing fits at all: the explanation counts every host of every page.
    fake, sched = make(
        [host(f"l{i}", labels={"rack": "a"}) for i in range(5)],
        page_size=2,
        max_placement_results=2,
    )
    with pytest.raises(worker.NoValidHost, match="placement returned 5 candidate host"):
        sched.select_destinations(spec(node_selector={"rack": "b"}))


def test_capped_walk_reads_on_when_every_kept_host_loses_its_race():
    hosts = [host(f"h{i}") for i in range(6)]
    fake, sched = make(
        hosts, page_size=2, max_placement_results=2, max_attempts=1, random_walk_start=False
    )
    fake.steal = {hosts[0]["uuid"], hosts[1]["uuid"]}  # both hosts of the first page
    [[sel]] = sched.select_destinations(spec(request_id="req-race"))
    assert sel.host_name in ("h2", "h3")
    report = fake.reports["req-race"]
    assert report["races_lost"] == 2 and report["pages_fetched"] == 2
    assert fake.holder_of(sel.instance_uuid) == [sel.host_uuid]
