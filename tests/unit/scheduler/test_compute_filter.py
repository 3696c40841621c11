"""ComputeFilter: unschedulable hosts and hosts whose node agent went silent."""

import pytest

from joule.request_spec import load_request_spec
from scheduler import worker
from scheduler.filters.compute import ComputeFilter
from scheduler.hosts import HostState
from tests.unit.scheduler.conftest import make_conf
from tests.unit.scheduler.fakes import FakePlacement
from tests.unit.scheduler.fakes import host


def _spec(**kw):
    data = {"version": "1.0", "resources": {"VCPU": 1}, "project_id": "p", "user_id": "u"}
    data.update(kw)
    return load_request_spec(data)


@pytest.mark.parametrize(
    "unschedulable,down,passes",
    [(False, False, True), (True, False, False), (False, True, False), (True, True, False)],
)
def test_compute_filter(unschedulable, down, passes):
    h = HostState(uuid="a", unschedulable=unschedulable, down=down)
    assert ComputeFilter().host_passes(h, _spec()) is passes


def test_silent_agent_is_down_after_service_down_time_and_no_valid_host_says_so():
    hosts = [
        host("fresh", heartbeat_age=5.0, vcpu=2),
        host("silent", heartbeat_age=61.0, vcpu=64),
        host("from-file", heartbeat_age=None, vcpu=2),
    ]
    fake = FakePlacement(hosts)
    sched = worker.Scheduler(make_conf(service_down_time=60), fake)
    # Only the silent host has 32 VCPUs free: NoValidHost names the reason.
    with pytest.raises(worker.NoValidHost) as raised:
        sched.select_destinations(_spec(resources={"VCPU": 32}))
    message = str(raised.value)
    assert "ComputeFilter" in message and "service_down_time" in message
    # A small request lands on a host that reported, or on the file-loaded one.
    [[sel, *alts]] = sched.select_destinations(_spec(resources={"VCPU": 1}))
    assert {sel.host_name, *(a.host_name for a in alts)} == {"fresh", "from-file"}
    # The agent comes back: schedulable again, nobody touched anything else.
    hosts[1]["heartbeat_age"] = 2.0
    [[sel, *_]] = worker.Scheduler(make_conf(service_down_time=60), fake).select_destinations(
        _spec(resources={"VCPU": 32})
    )
    assert sel.host_name == "silent"
    # A longer service_down_time keeps the silent host in.
    hosts[1]["heartbeat_age"] = 61.0
    relaxed = worker.Scheduler(make_conf(service_down_time=120), fake)
    [[sel, *_]] = relaxed.select_destinations(_spec(resources={"VCPU": 32}))
    assert sel.host_name == "silent"
