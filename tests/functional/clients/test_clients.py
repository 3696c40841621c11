"""Real placement clients, unchanged, against a live server.

- openstacksdk's placement proxy (what nova-adjacent tooling and the
  ``openstack`` SDK users call), at microversion 1.39 with ``auth_type=none``
  and the endpoint overridden to the live server;
- placeload (cdent's asynchronous loader, the tool upstream's own benchmarks
  use), run as its console script.

Both are in the ``test`` extra of setup.cfg; each test is skipped with the
reason when its client is not installed.
"""

import os
import subprocess
import sys
import uuid

import pytest

openstack_connection = pytest.importorskip(
    "openstack.connection", reason="openstacksdk not installed (pip install .[test])"
)
from openstack import exceptions as sdk_exc  # noqa: E402

PLACELOAD = os.path.join(os.path.dirname(sys.executable), "placeload")

# The SDK warns about its own deprecations (RemovedInSDK50/60Warning, which
# are PendingDeprecationWarnings); they are not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore::PendingDeprecationWarning",
    "ignore::openstack.warnings.OpenStackDeprecationWarning",
)


def _sdk(url):
    # cloud=None: no clouds.yaml and no OS_* variables are read.
    conn = openstack_connection.Connection(
        auth_type="none", placement_endpoint_override=url, placement_api_version="1.39"
    )
    return conn.placement


def test_openstacksdk_placement_proxy(live_server, client):
    p = _sdk(live_server.url)
    agg1, agg2 = str(uuid.uuid4()), str(uuid.uuid4())

    # Resource providers: create (root and child), list, show, update.
    rp = p.create_resource_provider(name="cn1")
    assert rp.name == "cn1" and rp.generation == 0 and rp.root_provider_id == rp.id
    child = p.create_resource_provider(name="cn1-numa0", parent_provider_uuid=rp.id)
    assert child.parent_provider_id == rp.id and child.root_provider_id == rp.id
    assert {r.name for r in p.resource_providers()} == {"cn1", "cn1-numa0"}
    assert [r.id for r in p.resource_providers(name="cn1")] == [rp.id]
    assert p.find_resource_provider("cn1").id == rp.id
    rp = p.update_resource_provider(rp, name="compute-1")
    assert p.get_resource_provider(rp.id).name == "compute-1"

    # Inventories: one by one, update one, replace all, delete one.
    inv = p.create_resource_provider_inventory(rp, resource_class="VCPU", total=8)
    assert inv.total == 8 and inv.resource_provider_generation == 1
    # The proxy sends the generation it is given (None -> a 400, as upstream).
    inv = p.update_resource_provider_inventory(
        inv, resource_provider=rp, resource_provider_generation=1, total=16, allocation_ratio=2.0
    )
    assert (inv.total, inv.allocation_ratio, inv.resource_provider_generation) == (16, 2.0, 2)
    rp = p.set_resource_provider_inventories(
        rp,
        {
            "VCPU": {"total": 16},
            "MEMORY_MB": {"total": 4096, "reserved": 512},
            "DISK_GB": {"total": 100},
        },
        resource_provider_generation=2,
    )
    assert rp.generation == 3
    assert {i.resource_class: i.total for i in p.resource_provider_inventories(rp)} == {
        "VCPU": 16,
        "MEMORY_MB": 4096,
        "DISK_GB": 100,
    }
    got = p.get_resource_provider_inventory("MEMORY_MB", resource_provider=rp)
    assert (got.total, got.reserved, got.min_unit, got.step_size) == (4096, 512, 1, 1)
    p.delete_resource_provider_inventory("DISK_GB", resource_provider=rp)
    assert {i.resource_class for i in p.resource_provider_inventories(rp)} == {"VCPU", "MEMORY_MB"}

    # Traits: create a custom one, list, set on the provider, clear.
    trait = p.create_trait("CUSTOM_FAST")
    assert p.get_trait(trait).name == "CUSTOM_FAST"
    assert [t.name for t in p.traits(name="startswith:CUSTOM_")] == ["CUSTOM_FAST"]
    rp_traits = p.get_resource_provider_trait(rp)
    gen = rp_traits.resource_provider_generation
    rp_traits = p.set_resource_provider_trait(
        rp_traits, traits=["CUSTOM_FAST", "HW_CPU_X86_AVX2"], resource_provider_generation=gen
    )
    assert sorted(rp_traits.traits) == ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]
    assert rp_traits.resource_provider_generation == gen + 1
    assert sorted(p.get_resource_provider_trait(rp).traits) == ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]
    # A trait in use cannot be deleted (409), a free one can.
    with pytest.raises(sdk_exc.ConflictException):
        p.delete_trait("CUSTOM_FAST", ignore_missing=False)
    p.delete_resource_provider_trait(rp)
    assert p.get_resource_provider_trait(rp).traits == []
    p.delete_trait("CUSTOM_FAST", ignore_missing=False)
    with pytest.raises(sdk_exc.NotFoundException):
        p.get_trait("CUSTOM_FAST")

    # Aggregates: the SDK sends the provider generation it holds (1.19+).
    rp = p.get_resource_provider(rp.id)
    rp = p.set_resource_provider_aggregates(rp, agg1, agg2)
    assert sorted(rp.aggregates) == sorted([agg1, agg2])
    assert sorted(p.fetch_resource_provider_aggregates(rp.id).aggregates) == sorted([agg1, agg2])
    assert [r.id for r in p.resource_providers(member_of=agg1)] == [rp.id]
    # A stale generation is the 409 the SDK raises as ConflictException.
    stale = p.get_resource_provider(rp.id)
    stale.generation -= 1
    with pytest.raises(sdk_exc.ConflictException):
        p.set_resource_provider_aggregates(stale, agg1)

    # Resource classes through the SDK too (1.7 create-or-exists).
    rc = p.create_resource_class(name="CUSTOM_GOLD")
    assert p.get_resource_class(rc).name == "CUSTOM_GOLD"
    p.delete_resource_class("CUSTOM_GOLD", ignore_missing=False)

    # Delete: a parent with a child is refused, then child and parent go.
    with pytest.raises(sdk_exc.ConflictException):
        p.delete_resource_provider(rp, ignore_missing=False)
    p.delete_resource_provider(child, ignore_missing=False)
    p.delete_resource_provider(rp, ignore_missing=False)
    assert list(p.resource_providers()) == []
    # The server agrees (not just the SDK's view).
    assert client.get("/resource_providers").get_json()["resource_providers"] == []


@pytest.mark.skipif(
    not os.path.exists(PLACELOAD), reason="placeload not installed (pip install .[test])"
)
def test_placeload(live_server, client):
    count = 6
    run = subprocess.run(
        [PLACELOAD, live_server.url, str(count), "3"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    # Progress letters: r(provider) i(nventory) a(ggregates) t(raits); a
    # capital letter is a failed request, C a connection error.
    progress = "".join(lines[1:-3])
    assert sorted(progress) == sorted("riat" * count), run.stdout
    aggregates = lines[-3:]

    rps = client.get("/resource_providers").get_json()["resource_providers"]
    assert len(rps) == count
    for rp in rps:
        assert rp["name"] == rp["uuid"] and rp["generation"] == 3
        inv = client.get(f"/resource_providers/{rp['uuid']}/inventories").get_json()
        assert {rc: i["total"] for rc, i in inv["inventories"].items()} == {
            "VCPU": 32,
            "MEMORY_MB": 8192,
            "DISK_GB": 8192,
        }
        aggs = client.get(f"/resource_providers/{rp['uuid']}/aggregates").get_json()
        assert aggs["aggregates"] and set(aggs["aggregates"]) <= set(aggregates)
        traits = client.get(f"/resource_providers/{rp['uuid']}/traits").get_json()
        assert traits["traits"]
    # placeload's own query: every provider is in the first aggregate.
    member = client.get(f"/resource_providers?member_of={aggregates[0]}").get_json()
    assert len(member["resource_providers"]) == count
    cands = client.get("/allocation_candidates?resources=VCPU:1,MEMORY_MB:128").get_json()
    assert len(cands["allocation_requests"]) == count
