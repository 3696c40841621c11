"""The conductor's agent driver against a fake compute API and placement."""

import pytest

from conductor import driver as driver_mod
from joule import rpc
from joule.request_spec import Selection

HOST, CHILD = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"


class FakeApi:
    def __init__(self, answer=None, raises=None, has=()):
        self.answer, self.raises, self.has = answer, raises, set(has)
        self.calls = []

    def build_instance(self, host, uuid, resources, workload, timeout, workload_class=None):
        self.calls.append(("build", host, resources, workload, workload_class))
        if self.raises:
            raise self.raises
        return self.answer

    def delete_instance(self, host, uuid, timeout, grace=None):
        self.calls.append(("delete", host, grace))

    def show_instance(self, host, uuid, timeout):
        self.calls.append(("show", host))
        return {"state": "running"} if host in self.has else None


class FakePlacement:
    def get_provider(self, uuid):
        if uuid == CHILD:
            return {"uuid": CHILD, "name": "gpu-0", "root_provider_uuid": HOST}
        return {"uuid": HOST, "name": "node-a", "root_provider_uuid": HOST}


def _selection(name="node-a"):
    request = {
        "allocations": {
            HOST: {"resources": {"VCPU": 2, "MEMORY_MB": 512}},
            CHILD: {"resources": {"PGPU": 1}},
        }
    }
    return Selection("i-1", HOST, name, None, request, claimed=True)


def test_a_build_carries_the_claim_over_the_hosts_tree():
    api = FakeApi({"state": "running"})
    driver_mod.AgentDriver(api, FakePlacement(), 5).spawn("i-1", _selection())
    assert api.calls == [("build", "node-a", {"VCPU": 2, "MEMORY_MB": 512, "PGPU": 1}, None, None)]


@pytest.mark.parametrize(
    "answer, raises, reason",
    [
        ({"state": "failed", "reason": "exit status 1"}, None, "exit status 1"),
        (None, rpc.Unanswered("no answer"), "no answer"),
        (None, rpc.AgentFailed("KeyError: x"), "KeyError: x"),
    ],
)
def test_a_failed_or_unanswered_build_is_a_build_failure(answer, raises, reason):
    api = FakeApi(answer, raises)
    with pytest.raises(driver_mod.BuildFailed, match=reason):
        driver_mod.AgentDriver(api, FakePlacement(), 5).spawn("i-1", _selection(name=None))
    # An unanswered or broken build is deleted there before the claim moves.
    deleted = [c for c in api.calls if c[0] == "delete"]
    assert deleted == ([] if raises is None else [("delete", "node-a", 0)])


def test_host_of_asks_each_host_once_by_its_root():
    api = FakeApi(has={"node-a"})
    driver = driver_mod.AgentDriver(api, FakePlacement(), 5)
    assert driver.host_of("i-1", (CHILD, HOST)) == HOST
    assert api.calls == [("show", "node-a")]
    assert driver_mod.AgentDriver(FakeApi(), FakePlacement(), 5).host_of("i-1", (HOST,)) is None


def test_host_of_an_unanswering_agent_is_unknown_not_absent():
    api = FakeApi()

    def silent(host, uuid, timeout):
        raise rpc.Unanswered("the agent of node-a did not answer")

    api.show_instance = silent
    with pytest.raises(driver_mod.HostsUnknown, match="did not answer"):
        driver_mod.AgentDriver(api, FakePlacement(), 5).host_of("i-1", (HOST,))
