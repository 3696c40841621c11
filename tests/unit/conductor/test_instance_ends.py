"""A conductor's handling of the ends its node agents report."""

from conductor import instance_ends
from joule import placement_client as client_mod

HOST, OTHER = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"


class Records:
    def __init__(self, records):
        self.records = records

    def get(self, uuid):
        return self.records.get(uuid)


class Client:
    def __init__(self, allocations):
        self.allocations = allocations
        self.states, self.released = [], []

    def set_instance_state(self, uuid, state, host_uuid, exit_status, reason):
        self.states.append((uuid, state, exit_status))
        return {}

    def get_allocations(self, uuid):
        return self.allocations.get(uuid, {}), 1

    def consumer_allocations(self, uuid):
        return {
            "allocations": self.allocations.get(uuid, {}),
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 1,
        }

    def put_allocations(self, uuid, body, project, user, consumer_generation, consumer_type):
        self.released.append(uuid)
        self.allocations.pop(uuid, None)


def _ends(records, allocations):
    client = Client(allocations)
    return instance_ends.InstanceEnds(Records(records), client), client


def _end(uuid, state="finished", status=0):
    return {"instance_uuid": uuid, "state": state, "exit_status": status}


def test_an_end_is_recorded_then_its_claim_released_and_acknowledged():
    claim = {HOST: {"resources": {"VCPU": 1}}}
    ends, client = _ends({"a": {"status": "placed", "host_uuid": HOST}}, {"a": dict(claim)})
    assert ends.ended("node-a", HOST, [_end("a", "errored", 3)]) == ["a"]
    assert client.states == [("a", "errored", 3)] and client.released == ["a"]
    # Reported again (the answer was lost): nothing more is released.
    assert ends.ended("node-a", HOST, [_end("a", "errored", 3)]) == ["a"]
    assert client.released == ["a"]


def test_an_end_before_the_builds_finish_is_left_for_the_next_report():
    claim = {HOST: {"resources": {"VCPU": 1}}}
    ends, client = _ends({"a": {"status": "pending", "host_uuid": None}}, {"a": dict(claim)})
    assert ends.ended("node-a", HOST, [_end("a")]) == []
    assert client.states == [] and client.released == []


def test_an_agent_that_has_not_registered_has_nothing_acknowledged():
    ends, client = _ends({"a": {"status": "placed", "host_uuid": HOST}}, {})
    assert ends.ended("node-a", None, [_end("a")]) == []


def test_an_end_on_a_host_that_does_not_hold_the_claim_releases_nothing():
    claim = {OTHER: {"resources": {"VCPU": 1}}}
    ends, client = _ends({"a": {"status": "placed", "host_uuid": OTHER}}, {"a": dict(claim)})
    assert ends.ended("node-a", HOST, [_end("a", "deleted", None)]) == ["a"]
    assert client.states == [] and client.released == [] and client.allocations["a"] == claim


def test_a_record_moved_away_meanwhile_releases_nothing():
    claim = {HOST: {"resources": {"VCPU": 1}}}
    ends, client = _ends({"a": {"status": "placed", "host_uuid": HOST}}, {"a": dict(claim)})

    def moved(*_args):
        raise client_mod.Conflict(
            "PUT", "/x", 409, instance_ends.NOT_THERE, "is placed on another host"
        )

    client.set_instance_state = moved
    assert ends.ended("node-a", HOST, [_end("a")]) == ["a"]
    assert client.released == [] and client.allocations["a"] == claim
