"""The allocation write refuses the scheduler's claims on a node that is not
on (extension, [power] suspend_enabled).

The scheduler leaves suspending, off and waking nodes out of its candidates,
but it keeps its candidate walks for seconds (scheduler/host_cache.py): a
claim planned on a view older than the power controller's twin write would
put an instance on a node being powered off. Placement checks the root's
power-state trait in the claim's own transaction, for writes that say their
workload class (the scheduler's); a plain client's write is never refused
here. Runs on SQLite and PostgreSQL (the ``client`` fixture).
"""

import uuid

import pytest

from joule import vocabulary
from tests import builders

POWER_STATE_CONFLICT = "placement.allocation.power_state_conflict"


def _new():
    return str(uuid.uuid4())


_claim = builders.allocation_body


def _node(client, db, power_state, nested=False):
    """A root provider whose twin has ``power_state`` (placement sets the
    power-state trait with it); returns (root, provider holding the VCPU)."""
    root = builders.create_provider(db, name=f"node-{_new()[:8]}")
    holder = root
    if nested:
        holder = builders.create_provider(db, name=f"numa-{_new()[:8]}", parent_uuid=root)
    builders.set_inventory(db, holder, "VCPU", 8)
    _set_power(client, root, power_state)
    return root, holder


def _set_power(client, root, power_state):
    twin = {"uuid": root, "profile": vocabulary.PERFORMANCE, "power_state": power_state}
    current = client.get(f"/nodes/{root}")
    if current.status_code == 200 and current.get_json().get("twin"):
        twin["generation"] = current.get_json()["twin"]["generation"]
    resp = client.post("/nodes/twins", json={"twins": [twin]})
    assert resp.status_code == 200, resp.get_json()


def _usages(client, rp):
    return client.get(f"/resource_providers/{rp}/usages").get_json()["usages"]


def _generation(client, rp):
    return client.get(f"/resource_providers/{rp}").get_json()["generation"]


@pytest.mark.parametrize("state", sorted(vocabulary.NOT_ON))
@pytest.mark.parametrize("nested", [False, True], ids=["root", "child"])
def test_a_scheduler_claim_on_a_node_that_is_not_on_is_refused_and_stores_nothing(
    client, db, state, nested
):
    root, holder = _node(client, db, state, nested=nested)
    before = _generation(client, holder)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_claim(holder, vocabulary.STANDARD))
    assert resp.status_code == 409, resp.get_json()
    err = resp.get_json()["errors"][0]
    assert err["code"] == POWER_STATE_CONFLICT
    trait = vocabulary.POWER_STATE_TRAITS[state]
    assert holder in err["detail"] and trait in err["detail"] and consumer in err["detail"]
    if nested:
        assert root in err["detail"]
    assert client.get(f"/allocations/{consumer}").get_json()["allocations"] == {}
    assert _generation(client, holder) == before
    assert _usages(client, holder) == {"VCPU": 0}


def test_a_bulk_claim_with_one_sleeping_node_stores_none_of_it(client, db):
    _root, awake = _node(client, db, vocabulary.POWER_ON)
    _root, asleep = _node(client, db, vocabulary.POWER_OFF)
    first, second = _new(), _new()
    body = {
        first: _claim(awake, vocabulary.PERFORMANCE),
        second: _claim(asleep, vocabulary.STANDARD),
    }
    resp = client.post("/allocations", json=body)
    assert resp.status_code == 409, resp.get_json()
    assert resp.get_json()["errors"][0]["code"] == POWER_STATE_CONFLICT
    assert _usages(client, awake) == {"VCPU": 0}
    assert _usages(client, asleep) == {"VCPU": 0}


def test_a_plain_clients_write_is_not_refused(client, db):
    # What nova or osc-placement send: no workload_class, so no check (as
    # upstream, which knows nothing of power states).
    _root, rp = _node(client, db, vocabulary.POWER_OFF)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_claim(rp))
    assert resp.status_code == 204, resp.get_json()
    assert _usages(client, rp) == {"VCPU": 1}


def test_a_node_back_on_takes_claims_again(client, db):
    root, rp = _node(client, db, vocabulary.POWER_WAKING)
    consumer = _new()
    resp = client.put(f"/allocations/{consumer}", json=_claim(rp, vocabulary.STANDARD))
    assert resp.status_code == 409
    _set_power(client, root, vocabulary.POWER_ON)
    resp = client.put(f"/allocations/{consumer}", json=_claim(rp, vocabulary.STANDARD))
    assert resp.status_code == 204, resp.get_json()
    assert _usages(client, rp) == {"VCPU": 1}


def test_an_eco_node_that_is_off_refuses_each_class_for_its_own_reason(client, db):
    # One query reads both traits: performance work is refused for the
    # profile first, standard work for the power state.
    root = builders.create_provider(db, name=f"node-{_new()[:8]}")
    builders.set_inventory(db, root, "VCPU", 8)
    twin = {"uuid": root, "profile": vocabulary.ECO, "power_state": vocabulary.POWER_OFF}
    resp = client.post("/nodes/twins", json={"twins": [twin]})
    assert resp.status_code == 200, resp.get_json()
    performance = client.put(f"/allocations/{_new()}", json=_claim(root, vocabulary.PERFORMANCE))
    assert performance.status_code == 409
    assert performance.get_json()["errors"][0]["code"] == "placement.allocation.profile_conflict"
    standard = client.put(f"/allocations/{_new()}", json=_claim(root, vocabulary.STANDARD))
    assert standard.status_code == 409
    assert standard.get_json()["errors"][0]["code"] == POWER_STATE_CONFLICT
    assert _usages(client, root) == {"VCPU": 0}
