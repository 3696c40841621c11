"""Property test: the candidate engine against a brute-force reference.

Random small clusters (nested trees, sharing providers, traits, aggregates,
partial usage) and random requests; the reference below enumerates every
assignment of groups to providers over the whole cluster and keeps those
that the API reference's rules allow, without anchors-per-root, SQL or
pruning. Both must give the same set of (allocations, mappings) and the same
provider summaries, on SQLite and PostgreSQL.
"""

import itertools
import uuid as uuid_lib

import hypothesis
import pytest
import sqlalchemy as sa
from hypothesis import strategies as st

from placement import db as db_mod
from placement import models as m

RCS = ["VCPU", "MEMORY_MB", "DISK_GB"]
TRAITS = ["CUSTOM_A", "CUSTOM_B"]
AGGS = [str(uuid_lib.UUID(int=i + 1)) for i in range(2)]
SHARE = "MISC_SHARES_VIA_AGGREGATE"


# -- cluster model --------------------------------------------------------


@st.composite
def clusters(draw):
    providers = []  # dicts: name, parent index or None, inv, traits, aggs, used
    n_roots = draw(st.integers(1, 3))
    for r in range(n_roots):
        root_index = len(providers)
        providers.append(_provider(draw, f"r{r}", None))
        for c in range(draw(st.integers(0, 2))):
            child = len(providers)
            providers.append(_provider(draw, f"r{r}c{c}", root_index))
            if draw(st.booleans()) and c == 0:
                providers.append(_provider(draw, f"r{r}c{c}g", child))
    for s in range(draw(st.integers(0, 1))):
        p = _provider(draw, f"s{s}", None)
        p["traits"].add(SHARE)
        p["inv"].setdefault("DISK_GB", (draw(st.integers(2, 6)), 0))
        providers.append(p)
    return providers


def _provider(draw, name, parent):
    inv = {}
    for rc in draw(st.sets(st.sampled_from(RCS), min_size=1, max_size=3)):
        total = draw(st.integers(1, 5))
        used = draw(st.sampled_from([0, 0, 1, total]))
        used = min(used, total)
        inv[rc] = (total, used)
    return {
        "name": name,
        "parent": parent,
        "inv": inv,
        "traits": set(draw(st.sets(st.sampled_from(TRAITS)))),
        "aggs": set(draw(st.sets(st.sampled_from(AGGS)))),
    }


@st.composite
def requests(draw):
    groups = {}
    if draw(st.booleans()):
        groups[""] = _group(draw)
    for i in range(draw(st.integers(0 if groups else 1, 2))):
        groups[str(i + 1)] = _group(draw)
    policy = draw(st.sampled_from(["none", "isolate"]))
    root_required = draw(st.sampled_from([None, None, "CUSTOM_A", "!CUSTOM_A"]))
    return groups, policy, root_required


def _group(draw):
    resources = {
        rc: draw(st.sampled_from([1, 1, 2]))
        for rc in draw(st.sets(st.sampled_from(RCS), min_size=1, max_size=2))
    }
    required = draw(st.sampled_from([set(), set(), {"CUSTOM_A"}]))
    forbidden = draw(st.sampled_from([set(), set(), {"CUSTOM_B"}]))
    member_of = draw(st.sampled_from([None, None, AGGS[0], "!" + AGGS[1], "in:" + ",".join(AGGS)]))
    return {
        "resources": resources,
        "required": required,
        "forbidden": forbidden,
        "member_of": member_of,
    }


# -- database -------------------------------------------------------------


def _wipe(db):
    with db.write() as conn:
        for table in (
            m.allocations,
            m.consumers,
            m.resource_provider_traits,
            m.resource_provider_aggregates,
            m.inventories,
        ):
            conn.execute(table.delete())
        conn.execute(
            m.resource_providers.update().values(parent_provider_id=None, root_provider_id=None)
        )
        conn.execute(m.resource_providers.delete())


def _load(db, cluster):
    """Insert the cluster; return uuids by index."""
    now = db_mod.utcnow()
    uuids = [str(uuid_lib.uuid4()) for _ in cluster]
    with db.write() as conn:
        rc_ids = dict(
            tuple(r)
            for r in conn.execute(sa.select(m.resource_classes.c.name, m.resource_classes.c.id))
        )
        tids = {}
        for name in TRAITS + [SHARE]:
            tid = conn.execute(
                sa.select(m.traits.c.id).where(m.traits.c.name == name)
            ).scalar_one_or_none()
            if tid is None:
                tid = conn.execute(
                    m.traits.insert().values(name=name, created_at=now)
                ).inserted_primary_key[0]
            tids[name] = tid
        aids = {}
        for agg in AGGS:
            aid = conn.execute(
                sa.select(m.placement_aggregates.c.id).where(m.placement_aggregates.c.uuid == agg)
            ).scalar_one_or_none()
            if aid is None:
                aid = conn.execute(
                    m.placement_aggregates.insert().values(uuid=agg)
                ).inserted_primary_key[0]
            aids[agg] = aid
        ids = []
        proj = conn.execute(sa.select(m.projects.c.id)).scalar()
        if proj is None:
            proj = conn.execute(m.projects.insert().values(external_id="p")).inserted_primary_key[0]
            conn.execute(m.users.insert().values(id=proj, external_id="u"))
        for i, p in enumerate(cluster):
            parent_id = ids[p["parent"]] if p["parent"] is not None else None
            root_id = None
            if parent_id is not None:
                root_id = conn.execute(
                    sa.select(m.resource_providers.c.root_provider_id).where(
                        m.resource_providers.c.id == parent_id
                    )
                ).scalar_one()
            new = conn.execute(
                m.resource_providers.insert().values(
                    uuid=uuids[i],
                    name=p["name"] + uuids[i][:6],
                    generation=0,
                    parent_provider_id=parent_id,
                    root_provider_id=root_id,
                    created_at=now,
                )
            ).inserted_primary_key[0]
            if root_id is None:
                conn.execute(
                    m.resource_providers.update()
                    .where(m.resource_providers.c.id == new)
                    .values(root_provider_id=new)
                )
            ids.append(new)
            for rc, (total, used) in p["inv"].items():
                conn.execute(
                    m.inventories.insert().values(
                        resource_provider_id=new,
                        resource_class_id=rc_ids[rc],
                        total=total,
                        reserved=0,
                        min_unit=1,
                        max_unit=total,
                        step_size=1,
                        allocation_ratio=1.0,
                        created_at=now,
                    )
                )
                if used:
                    consumer = str(uuid_lib.uuid4())
                    conn.execute(
                        m.consumers.insert().values(
                            uuid=consumer,
                            project_id=proj,
                            user_id=proj,
                            generation=0,
                            workload_class="standard",
                            created_at=now,
                        )
                    )
                    conn.execute(
                        m.allocations.insert().values(
                            resource_provider_id=new,
                            consumer_id=consumer,
                            resource_class_id=rc_ids[rc],
                            used=used,
                            created_at=now,
                        )
                    )
            for t in p["traits"]:
                conn.execute(
                    m.resource_provider_traits.insert().values(
                        resource_provider_id=new, trait_id=tids[t]
                    )
                )
            for agg in p["aggs"]:
                conn.execute(
                    m.resource_provider_aggregates.insert().values(
                        resource_provider_id=new, aggregate_id=aids[agg]
                    )
                )
    return uuids


# -- reference ------------------------------------------------------------


def _root(cluster, i):
    while cluster[i]["parent"] is not None:
        i = cluster[i]["parent"]
    return i


def _agg_sets(member_of):
    """member_of value -> (list of any-of sets, forbidden set)."""
    if member_of is None:
        return [], set()
    if member_of.startswith("!"):
        return [], {member_of[1:]}
    if member_of.startswith("in:"):
        return [set(member_of[3:].split(","))], set()
    return [{member_of}], set()


def reference(cluster, groups, policy, root_required):
    n = len(cluster)
    roots = [i for i in range(n) if cluster[i]["parent"] is None]
    sharing = [i for i in range(n) if SHARE in cluster[i]["traits"]]

    def tree(r):
        return [i for i in range(n) if _root(cluster, i) == r]

    def reaches(p, anchor):
        """p may serve a candidate anchored at root ``anchor``."""
        if _root(cluster, p) == anchor:
            return True
        return p in sharing and any(cluster[p]["aggs"] & cluster[q]["aggs"] for q in tree(anchor))

    def free(p, rc):
        total, used = cluster[p]["inv"].get(rc, (0, 0))
        return total - used

    def traits_ok(traits, g):
        return g["required"] <= traits

    results = set()
    suffixes = sorted(groups)
    # Every way to give each granular group one provider and each class of
    # the unnumbered group one provider.
    slots = []
    for s in suffixes:
        if s:
            slots.append([(s, None)])
        else:
            slots.append([("", rc) for rc in sorted(groups[""]["resources"])])
    flat = [slot for group_slots in slots for slot in group_slots]
    for choice in itertools.product(range(n), repeat=len(flat)):
        assign = dict(zip(flat, choice, strict=True))
        for anchor in roots:
            aset = cluster[anchor]["traits"]
            if root_required == "CUSTOM_A" and "CUSTOM_A" not in aset:
                continue
            if root_required == "!CUSTOM_A" and "CUSTOM_A" in aset:
                continue
            if not all(reaches(p, anchor) for p in choice):
                continue
            ok = True
            amounts = {}
            mappings = {}
            for s in suffixes:
                g = groups[s]
                any_of, forbidden_aggs = _agg_sets(g["member_of"])
                if s:
                    p = assign[(s, None)]
                    used = {p}
                    for rc, amt in g["resources"].items():
                        if free(p, rc) < amt:
                            ok = False
                    if (
                        not traits_ok(cluster[p]["traits"], g)
                        or cluster[p]["traits"] & g["forbidden"]
                    ):
                        ok = False
                    if (
                        not all(cluster[p]["aggs"] & a for a in any_of)
                        or cluster[p]["aggs"] & forbidden_aggs
                    ):
                        ok = False
                    for rc, amt in g["resources"].items():
                        amounts[(p, rc)] = amounts.get((p, rc), 0) + amt
                else:
                    used = set()
                    for rc, amt in g["resources"].items():
                        p = assign[("", rc)]
                        used.add(p)
                        if free(p, rc) < amt:
                            ok = False
                        pa, ra = cluster[p]["aggs"], cluster[anchor]["aggs"]
                        in_own_tree = _root(cluster, p) == anchor
                        if (
                            any_of
                            and not all(pa & a for a in any_of)
                            and not (in_own_tree and all(ra & a for a in any_of))
                        ):
                            ok = False
                        if pa & forbidden_aggs or ra & forbidden_aggs:
                            ok = False
                        amounts[(p, rc)] = amounts.get((p, rc), 0) + amt
                    union = set().union(*(cluster[p]["traits"] for p in used))
                    if not traits_ok(union, g):
                        ok = False
                    if any(cluster[p]["traits"] & g["forbidden"] for p in used):
                        ok = False
                mappings[s] = frozenset(used)
            if not ok:
                continue
            if policy == "isolate":
                granular = [next(iter(mappings[s])) for s in suffixes if s]
                if len(set(granular)) != len(granular):
                    continue
            if any(free(p, rc) < amt for (p, rc), amt in amounts.items()):
                continue
            results.add((frozenset(amounts.items()), frozenset(mappings.items())))
    return results


# -- the test -------------------------------------------------------------


def _query(groups, policy, root_required):
    parts = []
    for s, g in sorted(groups.items()):
        parts.append(
            f"resources{s}=" + ",".join(f"{rc}:{a}" for rc, a in sorted(g["resources"].items()))
        )
        traits = sorted(g["required"]) + ["!" + t for t in sorted(g["forbidden"])]
        if traits:
            parts.append(f"required{s}=" + ",".join(traits))
        if g["member_of"]:
            parts.append(f"member_of{s}=" + g["member_of"])
    if len([s for s in groups if s]) > 0:
        parts.append(f"group_policy={policy}")
    if root_required:
        parts.append(f"root_required={root_required}")
    return "&".join(parts)


@pytest.mark.parametrize("page_size", [None, 1])
def test_engine_matches_brute_force(client, db, page_size):
    seen = []

    @hypothesis.settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(cluster=clusters(), request=requests())
    def check(cluster, request):
        groups, policy, root_required = request
        _wipe(db)
        uuids = _load(db, cluster)
        expected = reference(cluster, groups, policy, root_required)
        expected = {
            (
                frozenset((uuids[p], rc, a) for (p, rc), a in amounts),
                frozenset((s, frozenset(uuids[p] for p in ps)) for s, ps in maps),
            )
            for amounts, maps in expected
        }
        url = "/allocation_candidates?" + _query(groups, policy, root_required)
        if page_size:
            url += f"&page_size={page_size}"
        got, summaries = [], {}
        while url:
            resp = client.get(url)
            assert resp.status_code == 200, resp.get_data(as_text=True)
            body = resp.get_json()
            got.extend(body["allocation_requests"])
            summaries.update(body["provider_summaries"])
            nxt = [link["href"] for link in body.get("links", [])]
            url = nxt[0] if nxt else None
        got_set = {
            (
                frozenset(
                    (rp, rc, a)
                    for rp, v in ar["allocations"].items()
                    for rc, a in v["resources"].items()
                ),
                frozenset((s, frozenset(ps)) for s, ps in ar["mappings"].items()),
            )
            for ar in got
        }
        assert len(got_set) == len(got), "a candidate was listed twice"
        assert got_set == expected
        seen.append(len(expected))
        # Summaries: every provider of every tree that serves a candidate.
        used_roots = {
            _root(cluster, uuids.index(rp)) for amounts, _ in expected for rp, _rc, _a in amounts
        }
        want = {uuids[i] for i in range(len(cluster)) if _root(cluster, i) in used_roots}
        assert set(summaries) == want
        for u in want:
            p = cluster[uuids.index(u)]
            assert summaries[u]["resources"] == {
                rc: {"capacity": t, "used": used} for rc, (t, used) in p["inv"].items()
            }
            assert set(summaries[u]["traits"]) == p["traits"]

    check()
    # Guard against a generator that only ever makes empty answers.
    assert sum(1 for n in seen if n) >= 3, seen
