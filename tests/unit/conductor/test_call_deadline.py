"""joule.rpc.SchedulerAPI: every try of a scheduler call carries its deadline
(RPC 1.3), a scheduler of 1.2 is called without one, and an ``expired``
answer counts as the caller's own timeout (issue 23, finding 2); the
watch of given-up instances (conductor.abandoned)."""

import time

import pytest

from conductor import abandoned as abandoned_mod
from conductor import conf as cconf
from joule import rpc
from joule.rpc import oslo_messaging


class _Client:
    """Stands for the RPC client: records each call's version and kwargs;
    ``answers`` are given in turn (an exception is raised)."""

    def __init__(self, answers, knows="1.3"):
        self.answers = list(answers)
        self.knows = knows
        self.version = "1.0"
        self.calls = []

    def prepare(self, version=None, **_kw):
        other = _Client((), self.knows)
        other.answers, other.calls = self.answers, self.calls
        other.version = version or self.version
        return other

    def call(self, _ctxt, method, **kw):
        self.calls.append((method, self.version, kw))
        if tuple(map(int, self.version.split("."))) > tuple(map(int, self.knows.split("."))):
            raise oslo_messaging.RemoteError("UnsupportedVersion", self.version)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _api(client, retries=1, timeout=10):
    conf = cconf.make_conf(
        overrides={
            (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
            ("rpc", "call_retries"): retries,
            ("rpc", "call_timeout"): timeout,
        }
    )
    api = rpc.SchedulerAPI(conf, rpc.transport_of(conf))
    api._client = client
    return api


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    monkeypatch.setattr(rpc.time, "sleep", lambda _s: None)


def test_each_try_carries_its_own_deadline_short_of_the_timeout():
    client = _Client([oslo_messaging.MessagingTimeout("slow"), {"status": "placed"}])
    api = _api(client, timeout=10)
    before = time.time()
    assert api.select_destinations({"request_id": "r"})["status"] == "placed"
    after = time.time()
    (m1, v1, kw1), (m2, v2, kw2) = client.calls
    assert (m1, v1, m2, v2) == ("select_destinations", "1.3", "select_destinations", "1.3")
    margin = rpc.deadline_margin(10)
    assert margin == rpc.DEADLINE_MARGIN
    for kw in (kw1, kw2):
        assert before + 10 - margin <= kw["deadline"] <= after + 10 - margin
    assert kw2["deadline"] >= kw1["deadline"]


def test_the_margin_is_a_quarter_of_a_short_timeout():
    assert rpc.deadline_margin(1) == 0.25
    assert rpc.deadline_margin(30) == rpc.DEADLINE_MARGIN


def test_an_expired_answer_is_a_timeout_released_and_retried():
    released = []
    client = _Client([{"status": "expired", "error": "late"}, {"status": "placed"}])
    api = _api(client)
    answer = api.select_destinations({"request_id": "r"}, on_retry=lambda: released.append(1))
    assert answer["status"] == "placed" and released == [1]


def test_expired_on_the_last_try_is_unanswered():
    client = _Client([{"status": "expired"}, {"status": "expired"}])
    api = _api(client)
    with pytest.raises(rpc.Unanswered):
        api.select_destinations({"request_id": "r"}, on_retry=lambda: None)
    assert len(client.calls) == 2


def test_a_bulk_call_with_an_expired_answer_is_retried_whole():
    released = []
    client = _Client(
        [
            [{"status": "no_valid_host"}, {"status": "expired"}],
            [{"status": "placed"}, {"status": "placed"}],
        ]
    )
    api = _api(client)
    answers = api.select_destinations_many(
        [{"request_id": "a"}, {"request_id": "b"}],
        releases=[lambda: released.append("a"), lambda: released.append("b")],
    )
    assert [a["status"] for a in answers] == ["placed", "placed"]
    assert released == ["a", "b"]
    assert [(m, v) for m, v, _kw in client.calls] == [("select_destinations_many", "1.3")] * 2


def test_a_scheduler_of_1_2_is_called_without_deadlines_from_then_on():
    client = _Client([[{"status": "placed"}], {"status": "placed"}], knows="1.2")
    api = _api(client)
    assert api.select_destinations_many([{"request_id": "a"}])[0]["status"] == "placed"
    assert api.select_destinations({"request_id": "b"})["status"] == "placed"
    versions = [(m, v, "deadline" in kw) for m, v, kw in client.calls]
    assert versions == [
        ("select_destinations_many", "1.3", True),  # refused: unsupported
        ("select_destinations_many", "1.2", False),
        ("select_destinations", "1.0", False),
    ]
    assert api._deadline_unsupported and not api._many_unsupported


def test_a_scheduler_of_1_1_gets_one_call_per_request_without_deadlines():
    client = _Client([{"status": "placed"}, {"status": "placed"}], knows="1.1")
    api = _api(client)
    answers = api.select_destinations_many([{"request_id": "a"}, {"request_id": "b"}])
    assert [a["status"] for a in answers] == ["placed", "placed"]
    assert [(m, v) for m, v, _kw in client.calls] == [
        ("select_destinations_many", "1.3"),
        ("select_destinations_many", "1.2"),
        ("select_destinations", "1.0"),
        ("select_destinations", "1.0"),
    ]


def test_a_request_no_scheduler_answered_is_said_unanswered():
    client = _Client([oslo_messaging.MessagingTimeout("x")] * 2, knows="1.1")
    api = _api(client, retries=0)
    answers = api.select_destinations_many([{"request_id": "a"}])
    assert answers[0]["status"] == "error" and answers[0][rpc.UNANSWERED] is True


def test_the_watch_of_given_up_instances_ends(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(abandoned_mod.time, "monotonic", lambda: now[0])
    watch = abandoned_mod.Abandoned(watch_seconds=10)
    watch.watch(["a", "b", "c"])
    assert watch.due(2) == ["a", "b"]
    assert watch.due(2) == ["c", "a"]  # in turns
    watch.forget("a")
    now[0] = 109.0
    assert sorted(watch.due(10)) == ["b", "c"]
    now[0] = 111.0
    assert watch.due(10) == [] and len(watch) == 0
