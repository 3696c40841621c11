"""The ranking (scheduler.ranking), kept up to date per decision, gives the
weights and the order nova's formula (``weighers.weigh_hosts``, recomputed
from scratch) gives, decision after decision, and draws among tied hosts
uniformly."""

import collections
import random

import pytest

from scheduler import picking
from scheduler import request_state
from scheduler import weighers as weighers_mod
from scheduler import worker
from scheduler.ranking import Ranker
from scheduler.report import Report
from scheduler.walk import CandidateWalk
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host
from tests.unit.scheduler.test_batching import spec


def _walk(hosts, request):
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(), fake, rng=random.Random(1))
    state = request_state.RequestState(request)
    walk = CandidateWalk(sched, state, Report(request))
    walk.fill()
    return sched, state, walk.passed


def _same(full, view):
    got = list(view)
    assert len(got) == len(full)
    for (w1, _p1, _h1), (w2, _p2, _h2) in zip(full, got, strict=True):
        assert abs(w1 - w2) < 1e-9
    # Equal weights may list their hosts in any order; the sets per weight match.
    by_weight = collections.defaultdict(set)
    for w, _p, h in full:
        by_weight[round(w, 9)].add(h.uuid)
    for w, _p, h in got:
        assert h.uuid in by_weight[round(w, 9)]
    # The report's parts of the first hosts add up to their weights.
    for w, parts, _h in view[:3]:
        assert abs(sum(parts.values()) - w) < 1e-9


@pytest.mark.parametrize("count", [300, 6])
def test_the_ranking_matches_a_full_recomputation_after_every_decision(count):
    # 6 hosts: the best host's bounds move at almost every decision.
    rng = random.Random(7)
    hosts = [
        host(f"h{i}", vcpu=rng.choice([16, 32, 64]), ram=rng.choice([65536, 131072]))
        for i in range(count)
    ]
    request = spec("r", vcpu=2, ram=2048)
    sched, state, passed = _walk(hosts, request)
    fast = Ranker(state, sched.weighers)
    fast.add(passed)
    lost = set()
    for step in range(400):
        _same(_full(passed, state, sched, lost), fast.rank(lost))
        _exact(fast, lost)
        target = rng.choice(passed)
        areq = picking.usable_for(target, request, True)
        if areq is None:
            continue
        target.consume(areq)
        fast.update(target)
        if step % 97 == 0:
            lost.add(rng.choice(passed).uuid)  # a lost race: rebuilt without it
    _same(_full(passed, state, sched, lost), fast.rank(lost))


def _exact(ranker, lost):
    """A rebuild's column sums equal, bit for bit, the one-host sum an
    update re-inserts with: equal hosts stay tied whichever way they got
    their totals (the herding defence draws among exact ties)."""
    for i, h in enumerate(ranker.hosts):
        if h.uuid not in lost:
            assert ranker.totals[i] == ranker._total(i), h.uuid


def _full(hosts, state, sched, lost):
    """Nova's formula from scratch over the hosts not lost, best first."""
    weighed = weighers_mod.weigh_hosts(
        [h for h in hosts if h.uuid not in lost], state, sched.weighers
    )
    return sorted(weighed, key=lambda item: item[0], reverse=True)


def test_a_decision_draws_uniformly_among_many_tied_hosts():
    hosts = [host(f"h{i}", vcpu=64, ram=65536) for i in range(400)]
    request = spec("r")
    sched, state, passed = _walk(hosts, request)
    ranker = Ranker(state, sched.weighers)
    ranker.add(passed)
    rng = random.Random(3)
    picks = collections.Counter()
    for _ in range(4000):
        available = ranker.rank(set()).available(
            lambda h: picking.fitting(h, request, True), 1, rng
        )
        assert len(available) == 1
        picks[available[0][2].uuid] += 1
    # 4,000 draws over 400 tied hosts: every host drawn, none far off 10.
    assert len(picks) == 400
    assert max(picks.values()) < 30
    # The first host in the index order is drawn like the others.
    first = ranker.rank(set()).hosts_prefix(1)[0].uuid
    assert picks[first] < 30


def test_few_ties_are_listed_in_order_like_the_full_ranking():
    rng = random.Random(5)
    hosts = [host(f"h{i}", vcpu=8 * (i + 1), ram=8192 * (i + 1)) for i in range(30)]
    request = spec("r")
    sched, state, passed = _walk(hosts, request)
    fast = Ranker(state, sched.weighers)
    fast.add(passed)
    full = _full(passed, state, sched, set())
    for subset in (1, 3):
        # The first ``subset`` usable hosts and every one tied with the best.
        want = []
        for w, _parts, h in full:
            if len(want) >= subset and w < want[0][0]:
                break
            if picking.fitting(h, request, True) is not None:
                want.append((w, None, h))
        got = fast.rank(set()).available(lambda h: picking.fitting(h, request, True), subset, rng)
        assert [(round(w, 9), h.uuid) for w, _a, h in got] == [
            (round(w, 9), h.uuid) for w, _a, h in want
        ]
