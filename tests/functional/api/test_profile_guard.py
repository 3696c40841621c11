"""The allocation write refuses performance work on an eco node (extension).

Placement checks the root's profile trait in the claim's own transaction, so
a scheduler that read its candidates before the power controller flipped a
node to eco (or kept them in its host cache) cannot put performance work
there. Runs on SQLite and PostgreSQL (the ``client`` fixture).
"""

import uuid

import pytest

from joule import vocabulary
from tests import builders

PROFILE_CONFLICT = "placement.allocation.profile_conflict"
ECO_TRAIT = vocabulary.PROFILE_TRAITS[vocabulary.ECO]


def _new():
    return str(uuid.uuid4())


_body = builders.allocation_body


def _node(client, db, profile, schedulable_class=None, nested=False):
    """A root provider whose twin has ``profile`` (placement sets the profile
    trait with it); returns (root, provider holding the VCPU)."""
    root = builders.create_provider(db, name=f"node-{_new()[:8]}")
    holder = root
    if nested:
        holder = builders.create_provider(db, name=f"numa-{_new()[:8]}", parent_uuid=root)
    builders.set_inventory(db, holder, "VCPU", 8)
    twin = {"uuid": root, "profile": profile}
    if schedulable_class is not None:
        twin["schedulable_class"] = schedulable_class
    resp = client.post("/nodes/twins", json={"twins": [twin]})
    assert resp.status_code == 200, resp.get_json()
    return root, holder


def _set_twin(client, root, profile, schedulable_class):
    twin = client.get(f"/nodes/{root}").get_json()["twin"]
    resp = client.post(
        "/nodes/twins",
        json={
            "twins": [
                {
                    "uuid": root,
                    "profile": profile,
                    "schedulable_class": schedulable_class,
                    "generation": twin["generation"],
                }
            ]
        },
    )
    assert resp.status_code == 200, resp.get_json()


def _err(resp):
    return resp.get_json()["errors"][0]


def _held(client, consumer):
    return client.get(f"/allocations/{consumer}").get_json()["allocations"]


def _generation(client, rp):
    return client.get(f"/resource_providers/{rp}").get_json()["generation"]


@pytest.mark.parametrize("nested", [False, True], ids=["root", "child"])
def test_performance_claim_on_eco_root_is_refused_and_stores_nothing(client, db, nested):
    root, holder = _node(client, db, vocabulary.ECO, nested=nested)
    before = _generation(client, holder)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_body(holder, vocabulary.PERFORMANCE))
    assert resp.status_code == 409, resp.get_json()
    err = _err(resp)
    assert err["code"] == PROFILE_CONFLICT
    assert holder in err["detail"] and ECO_TRAIT in err["detail"]
    assert consumer in err["detail"]
    if nested:
        assert root in err["detail"]
    assert _held(client, consumer) == {}
    assert _generation(client, holder) == before
    usages = client.get(f"/resource_providers/{holder}/usages").get_json()["usages"]
    assert usages == {"VCPU": 0}


def test_standard_and_unclassified_claims_on_eco_are_fine(client, db):
    _root, rp = _node(client, db, vocabulary.ECO)
    standard, plain = _new(), _new()
    resp = client.put(f"/allocations/{standard}", json=_body(rp, vocabulary.STANDARD))
    assert resp.status_code == 204, resp.get_json()
    # What nova or osc-placement send: no workload_class at all.
    resp = client.put(f"/allocations/{plain}", json=_body(rp))
    assert resp.status_code == 204, resp.get_json()
    assert set(client.get(f"/resource_providers/{rp}/allocations").get_json()["allocations"]) == {
        standard,
        plain,
    }


def test_performance_claim_on_performance_root_is_fine(client, db):
    _root, rp = _node(client, db, vocabulary.PERFORMANCE, nested=True)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_body(rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 204, resp.get_json()
    assert _held(client, consumer)[rp]["resources"] == {"VCPU": 1}


def test_draining_root_keeps_its_performance_work_but_takes_no_new(client, db):
    """A draining node's profile (and trait) is already eco: the consumer that
    runs there may be rewritten in place, a new one may not land."""
    root, rp = _node(client, db, vocabulary.PERFORMANCE)
    running = _new()
    resp = client.put(f"/allocations/{running}", json=_body(rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 204
    _set_twin(client, root, vocabulary.ECO, vocabulary.DRAINING)
    traits = client.get(f"/resource_providers/{root}/traits").get_json()["traits"]
    assert ECO_TRAIT in traits

    gen = client.get(f"/allocations/{running}").get_json()["consumer_generation"]
    resp = client.put(
        f"/allocations/{running}", json=_body(rp, vocabulary.PERFORMANCE, gen, amount=2)
    )
    assert resp.status_code == 204, resp.get_json()
    assert _held(client, running)[rp]["resources"] == {"VCPU": 2}

    newcomer = _new()
    resp = client.put(f"/allocations/{newcomer}", json=_body(rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 409
    assert _err(resp)["code"] == PROFILE_CONFLICT
    assert _held(client, newcomer) == {}


def test_post_allocations_with_one_refused_consumer_stores_nothing(client, db):
    _perf_root, perf_rp = _node(client, db, vocabulary.PERFORMANCE)
    _eco_root, eco_rp = _node(client, db, vocabulary.ECO)
    good, bad = _new(), _new()
    gens = {rp: _generation(client, rp) for rp in (perf_rp, eco_rp)}
    resp = client.post(
        "/allocations",
        json={
            good: _body(perf_rp, vocabulary.PERFORMANCE),
            bad: _body(eco_rp, vocabulary.PERFORMANCE),
        },
    )
    assert resp.status_code == 409, resp.get_json()
    assert _err(resp)["code"] == PROFILE_CONFLICT
    assert bad in _err(resp)["detail"] and eco_rp in _err(resp)["detail"]
    assert _held(client, good) == {} and _held(client, bad) == {}
    assert {rp: _generation(client, rp) for rp in gens} == gens


def test_move_onto_eco_is_refused_and_the_consumer_stays(client, db):
    _perf_root, perf_rp = _node(client, db, vocabulary.PERFORMANCE)
    _eco_root, eco_rp = _node(client, db, vocabulary.ECO)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_body(perf_rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 204
    gen = client.get(f"/allocations/{consumer}").get_json()["consumer_generation"]
    resp = client.put(f"/allocations/{consumer}", json=_body(eco_rp, vocabulary.PERFORMANCE, gen))
    assert resp.status_code == 409, resp.get_json()
    assert _err(resp)["code"] == PROFILE_CONFLICT
    after = client.get(f"/allocations/{consumer}").get_json()
    assert set(after["allocations"]) == {perf_rp}
    assert after["consumer_generation"] == gen


def test_node_flipped_to_eco_after_the_walk_refuses_the_claim(client, db):
    """The race the check closes: candidates read while the node was
    performance, the claim made after the power controller made it eco."""
    root, rp = _node(client, db, vocabulary.PERFORMANCE)
    resp = client.get("/allocation_candidates?resources=VCPU:1&root_required=!" + ECO_TRAIT)
    walked = list(resp.get_json()["provider_summaries"])
    assert rp in walked
    _set_twin(client, root, vocabulary.ECO, vocabulary.ECO)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_body(rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 409
    assert _err(resp)["code"] == PROFILE_CONFLICT


def test_sharing_provider_under_no_profile_is_not_a_host(client, db):
    """A sharing provider carrying the eco trait (nobody's host) does not
    refuse performance work; the compute node's root decides."""
    _root, rp = _node(client, db, vocabulary.PERFORMANCE)
    shared = builders.create_provider(db, name=f"share-{_new()[:8]}")
    builders.set_inventory(db, shared, "DISK_GB", 100)
    builders.set_traits(db, shared, "MISC_SHARES_VIA_AGGREGATE", ECO_TRAIT)
    consumer = _new()
    body = _body(rp, vocabulary.PERFORMANCE)
    body["allocations"][shared] = {"resources": {"DISK_GB": 10}}
    resp = client.put(f"/allocations/{consumer}", json=body)
    assert resp.status_code == 204, resp.get_json()


def test_eco_twin_of_a_node_running_performance_work_is_refused(client, db):
    """The power controller's side of the race: an eco twin (eco caps) for a
    node whose tree holds performance work is a 409 and changes nothing;
    draining is the twin for such a node, and eco is fine once it is gone."""
    root, rp = _node(client, db, vocabulary.PERFORMANCE, nested=True)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_body(rp, vocabulary.PERFORMANCE))
    assert resp.status_code == 204
    node = client.get(f"/nodes/{root}").get_json()
    root_generation = _generation(client, root)
    twin = {
        "uuid": root,
        "profile": vocabulary.ECO,
        "schedulable_class": vocabulary.ECO,
        "generation": node["twin"]["generation"],
    }
    resp = client.post("/nodes/twins", json={"twins": [twin]})
    assert resp.status_code == 409, resp.get_json()
    assert _err(resp)["code"] == "placement.concurrent_update"
    assert root in _err(resp)["detail"] and "performance work" in _err(resp)["detail"]
    after = client.get(f"/nodes/{root}").get_json()
    assert after["twin"] == node["twin"]
    assert after["profile_traits"] == [vocabulary.PROFILE_TRAITS[vocabulary.PERFORMANCE]]
    assert _generation(client, root) == root_generation

    # A standard consumer does not hold the node back.
    other = _new()
    resp = client.put(f"/allocations/{other}", json=_body(rp, vocabulary.STANDARD))
    assert resp.status_code == 204
    _set_twin(client, root, vocabulary.ECO, vocabulary.DRAINING)
    assert client.delete(f"/allocations/{consumer}").status_code == 204
    _set_twin(client, root, vocabulary.ECO, vocabulary.ECO)
    assert client.get(f"/nodes/{root}").get_json()["twin"]["schedulable_class"] == "eco"
