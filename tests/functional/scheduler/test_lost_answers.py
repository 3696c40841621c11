"""A lost answer is resolved, never reported as a refusal (issue 23, finding 3).

The records of a create are written all or none; when the answer to
``POST /build_requests`` is lost (the connection drops after placement
committed), the super conductor used to tell the submitter "refused" while
a sweep later scheduled and built the records anyway. Now the conductor
reads its records back: there, held by it, the create succeeded; not
there, it is sent again; someone else's, placement says so (a duplicate).
Against the real API server on both databases; only the answer is dropped.
"""

import pytest

from conductor import records as records_mod
from joule import placement_client as client_mod
from tests import builders
from tests.scheduling import make_scheduler


class _LosesAnswers:
    """A client whose next ``lose`` POSTs to /build_requests reach placement
    (``after`` True: and are committed) but whose answers never arrive."""

    def __init__(self, client, lose=1, after=True):
        self.client = client
        self.lose = lose
        self.after = after
        self.posts = 0

    def request(self, method, path, *args, **kwargs):
        if method == "POST" and path == "/build_requests":
            self.posts += 1
            if self.lose:
                self.lose -= 1
                if self.after:
                    self.client.request(method, path, *args, **kwargs)
                raise client_mod.PlacementUnreachable(method, path, "test", "connection reset")
        return self.client.request(method, path, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


def placement_client(live_server):
    return make_scheduler(live_server)[1]


def _items(request_id, count=2):
    return [
        dict(builders.build_request(request_id=request_id), workload_class="standard")
        for _ in range(count)
    ]


def _records(client, items):
    return {
        i["instance_uuid"]: client.request("GET", f"/build_requests/{i['instance_uuid']}").json()
        for i in items
    }


def test_a_create_whose_answer_is_lost_is_read_back_as_created(live_server, db):
    client = placement_client(live_server)
    lossy = _LosesAnswers(client)
    records = records_mod.Records(lossy, "super-1", 60)
    items = _items("req-lost")
    generations = records.create_held(items)
    stored = _records(client, items)
    assert generations == {i: r["generation"] for i, r in stored.items()}
    assert {r["owner"] for r in stored.values()} == {"super-1"}
    assert lossy.posts == 1  # read back, not created again


def test_a_create_that_never_arrived_is_sent_again(live_server, db):
    client = placement_client(live_server)
    lossy = _LosesAnswers(client, after=False)
    records = records_mod.Records(lossy, "super-1", 60)
    items = _items("req-never")
    generations = records.create_held(items)
    assert set(generations) == {i["instance_uuid"] for i in items}
    assert lossy.posts == 2
    assert {r["owner"] for r in _records(client, items).values()} == {"super-1"}


def test_another_owners_records_are_still_a_duplicate(live_server, db):
    client = placement_client(live_server)
    items = _items("req-theirs")
    records_mod.Records(client, "super-2", 60).create_held(items)
    lossy = _LosesAnswers(client, after=False)
    with pytest.raises(records_mod.AlreadyRecorded):
        records_mod.Records(lossy, "super-1", 60).create_held(items)
    assert {r["owner"] for r in _records(client, items).values()} == {"super-2"}


def test_our_records_of_an_earlier_handling_are_not_this_creates(live_server, db):
    """A redelivered request whose records this conductor made and has
    moved on since (renewed, here; handed off or finished alike) is a
    duplicate, not "created": it must not be scheduled a second time."""
    client = placement_client(live_server)
    items = _items("req-again")
    records = records_mod.Records(client, "super-1", 60)
    first = records.create_held(items)
    records.take_many(first)  # the first handling goes on (a renewal)
    lossy = _LosesAnswers(client, after=False)
    with pytest.raises(records_mod.AlreadyRecorded):
        records_mod.Records(lossy, "super-1", 60).create_held(items)
