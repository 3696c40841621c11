"""Traits over HTTP: CUSTOM_ lifecycle, list filters, provider traits with generations."""

from tests import builders


def _detail(resp):
    return resp.get_json()["errors"][0]["detail"]


def test_custom_trait_lifecycle(client):
    assert client.put("/traits/CUSTOM_FAST", version="1.5").status_code == 404
    resp = client.put("/traits/CUSTOM_FAST")
    assert resp.status_code == 201 and resp.headers["location"].endswith("/traits/CUSTOM_FAST")
    assert client.put("/traits/CUSTOM_FAST").status_code == 204
    assert client.get("/traits/CUSTOM_FAST").status_code == 204
    for bad in ("FAST", "CUSTOM_a", "CUSTOM_" + "A" * 250):
        resp = client.put(f"/traits/{bad}")
        assert resp.status_code == 400 and "The trait is invalid" in _detail(resp)
    resp = client.delete("/traits/HW_CPU_X86_AVX")
    assert resp.status_code == 400 and "Cannot delete standard trait" in _detail(resp)
    assert client.delete("/traits/CUSTOM_FAST").status_code == 204
    assert client.get("/traits/CUSTOM_FAST").status_code == 404
    assert client.delete("/traits/CUSTOM_FAST").status_code == 404


def test_list_filters(client, db):
    for name in ("CUSTOM_A_1", "CUSTOM_A_2", "CUSTOM_AB", "CUSTOM_B"):
        client.put(f"/traits/{name}")
    rp = builders.create_provider(db, "rp")
    builders.set_traits(db, rp, "CUSTOM_B")

    def names(query):
        resp = client.get(f"/traits?{query}")
        assert resp.status_code == 200
        return resp.get_json()["traits"]

    # '_' is literal in a prefix, not a wildcard.
    assert sorted(names("name=startswith:CUSTOM_A_")) == ["CUSTOM_A_1", "CUSTOM_A_2"]
    assert sorted(names("name=in:CUSTOM_AB,CUSTOM_B,HW_CPU_X86_AVX")) == [
        "CUSTOM_AB",
        "CUSTOM_B",
        "HW_CPU_X86_AVX",
    ]
    assert names("associated=true") == ["CUSTOM_B"]
    assert "CUSTOM_B" not in names("associated=false&name=startswith:CUSTOM")
    assert "HW_CPU_X86_AVX" in names("")
    for query, text in [
        ("name=CUSTOM_B", "Badly formatted name parameter"),
        ("associated=maybe", 'only accepts "true" or "false"'),
        ("colour=red", "Additional properties are not allowed"),
    ]:
        resp = client.get(f"/traits?{query}")
        assert resp.status_code == 400 and text in _detail(resp)


def test_provider_traits(client, db):
    rp = builders.create_provider(db, "rp")
    url = f"/resource_providers/{rp}/traits"
    assert client.get(url).get_json() == {"traits": [], "resource_provider_generation": 0}
    resp = client.put(
        url,
        json={"traits": ["HW_CPU_X86_AVX", "STORAGE_DISK_SSD"], "resource_provider_generation": 0},
    )
    assert resp.status_code == 200 and resp.get_json()["resource_provider_generation"] == 1
    assert sorted(resp.get_json()["traits"]) == ["HW_CPU_X86_AVX", "STORAGE_DISK_SSD"]

    stale = client.put(url, json={"traits": [], "resource_provider_generation": 0})
    assert stale.status_code == 409
    assert stale.get_json()["errors"][0]["code"] == "placement.concurrent_update"
    missing = client.put(
        url, json={"traits": ["CUSTOM_NOPE", "HW_CPU_X86_AVX"], "resource_provider_generation": 1}
    )
    assert missing.status_code == 400 and "No such trait CUSTOM_NOPE" in _detail(missing)
    assert len(client.get(url).get_json()["traits"]) == 2  # unchanged

    # The same set again changes nothing, so the generation stays.
    same = client.put(
        url,
        json={"traits": ["STORAGE_DISK_SSD", "HW_CPU_X86_AVX"], "resource_provider_generation": 1},
    )
    assert same.get_json()["resource_provider_generation"] == 1
    inuse = client.delete("/traits/HW_CPU_X86_AVX")  # standard: 400 before in-use
    assert inuse.status_code == 400
    client.put("/traits/CUSTOM_MINE")
    client.put(url, json={"traits": ["CUSTOM_MINE"], "resource_provider_generation": 1})
    resp = client.delete("/traits/CUSTOM_MINE")
    assert resp.status_code == 409 and "is in use by a resource provider" in _detail(resp)

    assert client.delete(url).status_code == 204
    assert client.get(url).get_json() == {"traits": [], "resource_provider_generation": 3}
    assert client.get("/resource_providers/nope/traits").status_code == 404
