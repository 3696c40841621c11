"""A request spec is loaded once where it enters the conductor and travels
inside it as a RequestSpec: dumped only where it leaves (its records, the
scheduling call, a build cast to a cell), never dumped and loaded again on
its way from the super conductor to a build in the same process."""

import pytest

from conductor import conf as cconf
from conductor import driver as driver_mod
from conductor import service as cservice
from joule import request_spec as spec_mod
from joule import rpc

HOST = "6a6f756c-6500-4000-8000-00000000a001"
INSTANCES = [f"6a6f756c-6500-4000-8000-00000000000{n}" for n in range(3)]


class _Scheduler:
    """Places every instance on one host; its cell is ``cell``."""

    def __init__(self, cell):
        self.cell = cell

    def select_destinations(self, request_spec, on_retry=None):
        spec = spec_mod.load_request_spec(request_spec)  # the scheduler's own process
        hosts = [
            [
                spec_mod.Selection(
                    i,
                    HOST,
                    "host-1",
                    self.cell,
                    {"allocations": {HOST: {"resources": {"VCPU": 1}}}},
                    claimed=True,
                )
            ]
            for i in spec.instance_uuids
        ]
        return {"status": "placed", "selections": spec_mod.dump_selections(spec.request_id, hosts)}

    def select_destinations_many(self, request_specs, releases=None):
        return [self.select_destinations(s) for s in request_specs]

    def build_outcomes(self, counts):
        pass


class _Cells:
    def __init__(self):
        self.sent = []

    def build_many(self, cell, builds, reply_topic):
        self.sent.append((cell, builds, reply_topic))


class _Outcomes:
    def __init__(self):
        self.done = []

    def instance_done(self, reply_topic, outcome):
        self.done.append(outcome)

    def instances_done(self, reply_topic, outcomes):
        self.done.extend(outcomes)


def _conductor(monkeypatch, cell):
    conf = cconf.make_conf(overrides={(None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL})
    c = cservice.Conductor(
        conf, object(), rpc.transport_of(conf), driver_mod.SimulatedDriver(), "super-1"
    )
    c.scheduler, c.conductors, c.outcomes = _Scheduler(cell), _Cells(), _Outcomes()
    records = c.records
    monkeypatch.setattr(
        records, "create_held", lambda items: {i["instance_uuid"]: 1 for i in items}
    )
    monkeypatch.setattr(
        records, "take_many", lambda gens, hand_off=False, holders=None: {i: 2 for i in gens}
    )
    monkeypatch.setattr(records, "take", lambda instance, generation, hand_off=False: 3)
    monkeypatch.setattr(records, "finish", lambda *a, **kw: True)
    return c


@pytest.fixture
def counted(monkeypatch):
    """Calls of the spec's load and dump, by the conductor's modules."""
    calls = {"load": 0, "dump": 0}
    real_load, real_dump = spec_mod.load_request_spec, spec_mod.dump_request_spec

    def load(data):
        calls["load"] += 1
        return real_load(data)

    def dump(spec):
        calls["dump"] += 1
        return real_dump(spec)

    monkeypatch.setattr(spec_mod, "load_request_spec", load)
    monkeypatch.setattr(spec_mod, "dump_request_spec", dump)
    return calls


def _request():
    return {
        "version": "1.0",
        "request_id": "req-once",
        "project_id": "p",
        "user_id": "u",
        "resources": {"VCPU": 1},
        "instance_uuids": INSTANCES,
    }


def test_a_host_without_a_cell_is_built_from_the_spec_in_hand(monkeypatch, counted):
    c = _conductor(monkeypatch, cell=None)
    c.build_instances(_request(), "build-submit.abc")
    assert sorted(o["instance_uuid"] for o in c.outcomes.done) == INSTANCES
    assert {o["status"] for o in c.outcomes.done} == {"placed"}
    assert sorted(i for i, _host in c.driver.built) == INSTANCES
    # Loaded where it entered, and by the scheduler's stand-in; dumped for
    # the three records and the scheduling call: nothing for the builds.
    assert counted == {"load": 2, "dump": 4}
    assert c.conductors.sent == []


def test_a_build_for_a_cell_leaves_the_process_as_a_message(monkeypatch, counted):
    c = _conductor(monkeypatch, cell="cell1")
    c.build_instances(_request(), "build-submit.abc")
    [(cell, builds, topic)] = c.conductors.sent
    assert cell == "cell1" and topic == "build-submit.abc"
    assert [b["instance_uuid"] for b in builds] == INSTANCES
    assert [spec_mod.load_request_spec(b["request_spec"]).instance_uuids for b in builds] == [
        (i,) for i in INSTANCES
    ]
    # Records, scheduling call, one spec per build cast.
    assert counted["dump"] == 3 + 1 + 3
    assert c.driver.built == []
