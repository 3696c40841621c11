"""joule.rpc.SchedulerAPI.select_destinations_many: retries and releases,
in bulk and one by one (against a scheduler that does not know 1.2)."""

from conductor import conf as cconf
from joule import rpc
from joule.rpc import oslo_messaging


class _Client:
    """Stands for the RPC client: answers per request id, times out on some."""

    def __init__(self, timeouts, bulk="unsupported"):
        self.timeouts = set(timeouts)
        self.bulk = bulk
        self.calls = []

    def prepare(self, **_kw):
        return self

    def call(self, _ctxt, method, **kw):
        self.calls.append(method)
        if method == "select_destinations_many":
            if self.bulk == "unsupported":
                raise oslo_messaging.UnsupportedVersion("1.2")
            if self.bulk == "timeout":
                raise oslo_messaging.MessagingTimeout("slow")
            return [{"status": "placed", "id": s["request_id"]} for s in kw["request_specs"]]
        rid = kw["request_spec"]["request_id"]
        if rid in self.timeouts:
            raise oslo_messaging.MessagingTimeout("nobody")
        return {"status": "placed", "id": rid}


def _api(client, retries=1):
    conf = cconf.make_conf(
        overrides={
            (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
            ("rpc", "call_retries"): retries,
            ("rpc", "call_timeout"): 1,
        }
    )
    api = rpc.SchedulerAPI(conf, rpc.transport_of(conf))
    api._client = client
    return api


def _run(api, ids):
    released = []
    answers = api.select_destinations_many(
        [{"request_id": i} for i in ids],
        releases=[(lambda i=i: released.append(i)) for i in ids],
    )
    return answers, released


def test_one_by_one_a_timeout_releases_and_fails_only_its_own_request(monkeypatch):
    monkeypatch.setattr(rpc.time, "sleep", lambda _s: None)
    api = _api(_Client(timeouts={"r2"}))
    answers, released = _run(api, ["r1", "r2", "r3"])
    assert api._many_unsupported
    assert [a["status"] for a in answers] == ["placed", "error", "placed"]
    assert "no scheduler answered" in answers[1]["error"]
    # r1 was placed before r2's call timed out: its claim stays.
    assert released == ["r2"]


def test_a_bulk_retry_releases_every_request_of_it(monkeypatch):
    monkeypatch.setattr(rpc.time, "sleep", lambda _s: None)
    client = _Client(timeouts=(), bulk="timeout")
    api = _api(client, retries=2)
    released = []
    try:
        api.select_destinations_many(
            [{"request_id": "r1"}, {"request_id": "r2"}],
            releases=[lambda: released.append("r1"), lambda: released.append("r2")],
        )
    except rpc.Unanswered:
        pass
    else:
        raise AssertionError("an unanswered bulk call must raise")
    assert client.calls == ["select_destinations_many"] * 3
    # Before each of the two retries, every request of the call.
    assert released == ["r1", "r2", "r1", "r2"]


def test_bulk_answers_come_back_in_order():
    api = _api(_Client(timeouts=(), bulk="ok"))
    answers, released = _run(api, ["a", "b", "c"])
    assert [a["id"] for a in answers] == ["a", "b", "c"] and released == []
