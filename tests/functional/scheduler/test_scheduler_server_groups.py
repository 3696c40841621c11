"""Server groups through the scheduler over a live placement (SQLite and
PostgreSQL): each policy, the NoValidHost explanation, and concurrent
scheduler-worker processes placing one anti-affinity group."""

import collections
import uuid

import pytest

from scheduler import worker
from tests import processes
from tests import specs
from tests.scheduling import add_hosts
from tests.scheduling import make_scheduler


def _spec(group, **kw):
    return specs.spec_builder(version="1.1", server_group=group)(**kw)


def _group(client, policy, rules=None):
    body = {"name": policy, "policy": policy, "project_id": "proj", "user_id": "usr"}
    if rules:
        body["rules"] = rules
    resp = client.post("/server_groups", json=body)
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()["uuid"]


def _hosts(db, client, count, vcpu=8):
    return add_hosts(db, client, [(f"h{i}", "c1", None, vcpu, vcpu * 1024) for i in range(count)])


def _selected(selections):
    return [hl[0].host_uuid for hl in selections]


def test_anti_affinity_spreads_and_explains_when_hosts_run_out(db, client, live_server):
    hosts = _hosts(db, client, 3)
    group = _group(client, "anti-affinity")
    # Stacking weighers would put everything on one host without the group.
    sched, _pc = make_scheduler(live_server, ram_weight_multiplier=-1.0, cpu_weight_multiplier=-1.0)
    first = _selected(sched.select_destinations(_spec(group, num_instances=2)))
    assert len(set(first)) == 2
    second = _selected(sched.select_destinations(_spec(group)))
    assert set(first + second) == set(hosts.values())
    # Every host runs a member: the filter explains the refusal.
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec(group, request_id="req-group-full"))
    text = str(err.value)
    assert "ServerGroupAntiAffinityFilter removed 3" in text
    assert "max_server_per_host members of the anti-affinity group" in text
    # Nothing of the refused request is held; the group has three members.
    shown = client.get(f"/server_groups/{group}").get_json()
    assert len(shown["members"]) == 3 and len(shown["hosts"]) == 3


def test_anti_affinity_within_one_request_beyond_the_hosts(db, client, live_server):
    _hosts(db, client, 2)
    group = _group(client, "anti-affinity")
    sched, _pc = make_scheduler(live_server)
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(_spec(group, num_instances=3, request_id="req-3-on-2"))
    assert "could place 2 of 3" in str(err.value)
    assert (
        f"server group {group} (anti-affinity, max_server_per_host 1) ruled out 2 "
        "more host(s)" in str(err.value)
    )
    # The request's claims were released.
    assert client.get(f"/server_groups/{group}").get_json()["hosts"] == {}


def test_max_server_per_host(db, client, live_server):
    hosts = _hosts(db, client, 2)
    group = _group(client, "anti-affinity", {"max_server_per_host": 2})
    sched, _pc = make_scheduler(live_server, ram_weight_multiplier=-1.0, cpu_weight_multiplier=-1.0)
    placed = _selected(sched.select_destinations(_spec(group, num_instances=4)))
    assert collections.Counter(placed) == {hosts["h0"]: 2, hosts["h1"]: 2}


def test_affinity_keeps_every_member_on_one_host(db, client, live_server):
    hosts = _hosts(db, client, 4)
    group = _group(client, "affinity")
    # Spreading weighers would use four hosts without the group.
    sched, _pc = make_scheduler(live_server)
    placed = _selected(sched.select_destinations(_spec(group, num_instances=3)))
    assert len(set(placed)) == 1
    (home,) = set(placed)
    later = _selected(sched.select_destinations(_spec(group, num_instances=2)))
    assert set(later) == {home}
    # The home host is full (8 VCPU, 5 used, 3 more asked): refused, explained.
    with pytest.raises(worker.NoValidHost) as err:
        sched.select_destinations(
            _spec(group, num_instances=1, resources={"VCPU": 4, "MEMORY_MB": 512})
        )
    assert "ServerGroupAffinityFilter removed 3" in str(err.value)
    assert home in hosts.values()


def test_soft_policies_weigh_instead_of_refusing(db, client, live_server):
    hosts = _hosts(db, client, 3, vcpu=4)
    soft_anti = _group(client, "soft-anti-affinity")
    sched, _pc = make_scheduler(
        live_server,
        ram_weight_multiplier=-1.0,
        cpu_weight_multiplier=-1.0,
        soft_anti_affinity_weight_multiplier=10.0,
    )
    spread = _selected(sched.select_destinations(_spec(soft_anti, num_instances=3)))
    assert sorted(spread) == sorted(hosts.values())
    # More members than hosts: soft, so placed anyway.
    more = _selected(sched.select_destinations(_spec(soft_anti, num_instances=2)))
    assert len(more) == 2

    soft = _group(client, "soft-affinity")
    sched, _pc = make_scheduler(live_server, soft_affinity_weight_multiplier=10.0)
    packed = _selected(sched.select_destinations(_spec(soft, num_instances=2)))
    assert len(set(packed)) == 1


def test_unknown_group_is_a_clear_error(db, client, live_server):
    _hosts(db, client, 1)
    sched, _pc = make_scheduler(live_server)
    missing = str(uuid.uuid4())
    with pytest.raises(worker.SchedulerError) as err:
        sched.select_destinations(_spec(missing))
    assert f"names server group {missing}, which placement does not know" in str(err.value)


WORKERS = 4
MEMBERS = 40


def test_four_workers_place_a_40_member_anti_affinity_group_on_40_hosts(
    db, client, live_server, tmp_path
):
    """Every worker prefers the same hosts (stacking weighers, no shuffle of
    ties helps them apart) and reads the group before the others' claims
    land: only placement's check in the claim keeps members apart."""
    hosts = _hosts(db, client, MEMBERS, vcpu=4)
    group = _group(client, "anti-affinity")
    summaries = processes.run_batches(
        tmp_path,
        live_server.url,
        [[_spec(group, num_instances=2)] * (MEMBERS // WORKERS // 2) for _ in range(WORKERS)],
        OS_SCHEDULER__MAX_ATTEMPTS="1",
        OS_FILTER_SCHEDULER__RAM_WEIGHT_MULTIPLIER="-1.0",
        OS_FILTER_SCHEDULER__CPU_WEIGHT_MULTIPLIER="-1.0",
    )
    assert sum(s["placed"] for s in summaries) == MEMBERS // 2, summaries
    assert sum(s["failed"] for s in summaries) == 0, summaries
    shown = client.get(f"/server_groups/{group}").get_json()
    assert len(shown["members"]) == MEMBERS
    assert sorted(shown["hosts"]) == sorted(hosts.values())
    assert all(len(members) == 1 for members in shown["hosts"].values())
    # The ledger agrees: one member's allocation per host.
    for rp in hosts.values():
        held = client.get(f"/resource_providers/{rp}/allocations").get_json()["allocations"]
        assert len(held) == 1
