"""The placement REST client: paging, error mapping, idempotent unclaim."""

import pytest
import requests

from scheduler import client as client_mod


class Resp:
    def __init__(self, status, body=None):
        self.status_code = status
        self._body = body
        self.text = str(body)

    def json(self):
        if self._body is None:
            raise ValueError("no body")
        return self._body


class Session:
    def __init__(self, answers):
        self.answers = list(answers)
        self.sent = []

    def request(self, method, url, **kwargs):
        self.sent.append((method, url, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def err(status, detail, code="placement.undefined_code"):
    return Resp(status, {"errors": [{"status": status, "title": "x", "code": code,
                                     "detail": f"Generic explanation.\n\n {detail}  "}]})


def test_walks_next_links_with_node_data():
    session = Session([
        Resp(200, {"allocation_requests": [1], "links": [
            {"rel": "next", "href": "/allocation_candidates?x=1&page_marker=abc"}]}),
        Resp(200, {"allocation_requests": [2], "links": []}),
    ])
    c = client_mod.PlacementClient("http://p/", session=session)
    pages = list(c.candidate_pages([("resources", "VCPU:1")], 50))
    assert [p["allocation_requests"] for p in pages] == [[1], [2]]
    first = session.sent[0][1]
    assert first.startswith("http://p/allocation_candidates?resources=VCPU%3A1&page_size=50"
                            "&node_data=true")
    assert session.sent[1][1] == "http://p/allocation_candidates?x=1&page_marker=abc"
    assert session.sent[0][2]["headers"]["openstack-api-version"] == "placement 1.39"


def test_a_repeating_next_link_stops_with_an_error():
    loop = {"allocation_requests": [], "links": [{"rel": "next", "href": "/a?m=1"}]}
    c = client_mod.PlacementClient("http://p", session=Session([Resp(200, loop)] * 3))
    with pytest.raises(client_mod.PlacementError, match="paging did not terminate"):
        list(c.candidate_pages([], 10))


def test_conflicts_and_errors_are_typed():
    c = client_mod.PlacementClient("http://p", session=Session([
        err(409, "consumer generation conflict - expected null but got 1",
            "placement.concurrent_update"),
        err(409, "Unable to allocate inventory"),
        err(400, "Invalid resource class in resources parameter"),
    ]))
    areq = {"allocations": {"rp": {"resources": {"VCPU": 1}}}}
    with pytest.raises(client_mod.ClaimConflict) as e1:
        c.put_allocations("c", areq, "p", "u")
    assert e1.value.consumer_conflict and e1.value.code == "placement.concurrent_update"
    with pytest.raises(client_mod.ClaimConflict) as e2:
        c.put_allocations("c", areq, "p", "u")
    assert not e2.value.consumer_conflict
    with pytest.raises(client_mod.PlacementError) as e3:
        c.get_allocations("c")
    assert e3.value.status == 400
    assert e3.value.detail == "Invalid resource class in resources parameter"


def test_unclaim_is_idempotent_and_retried_when_unreachable():
    session = Session([Resp(204), Resp(404, {"errors": []}),
                       requests.ConnectionError("Connection refused"), Resp(204)])
    c = client_mod.PlacementClient("http://p", connect_retries=1, session=session)
    c.delete_allocations("x")
    c.delete_allocations("x")
    c.delete_allocations("x")  # first attempt unreachable, retried
    assert len(session.sent) == 4


def test_claims_are_not_blindly_retried_when_unreachable():
    session = Session([requests.ConnectionError("Connection refused"), Resp(204)])
    c = client_mod.PlacementClient("http://p", connect_retries=3, session=session)
    with pytest.raises(client_mod.PlacementUnreachable,
                       match=r"placement at http://p is unreachable \(PUT /allocations/c\): "
                             "connection refused"):
        c.put_allocations("c", {"allocations": {}}, "p", "u")
    assert len(session.sent) == 1


def test_next_links_resolve_under_a_prefixed_endpoint_and_never_leave_it():
    # Placement behind /placement gives links with its mount point.
    session = Session([
        Resp(200, {"links": [{"rel": "next", "href": "/placement/allocation_candidates?m=1"}]}),
        Resp(200, {"links": [{"rel": "next", "href": "/placement/../traits/CUSTOM_X"}]}),
    ])
    c = client_mod.PlacementClient("http://p/placement", session=session)
    pages = c.candidate_pages([], 10)
    next(pages)
    next(pages)
    with pytest.raises(client_mod.PlacementError, match="a next link leaves the placement "
                       "endpoint: /placement/../traits/CUSTOM_X"):
        next(pages)
    assert [url for _m, url, _kw in session.sent] == [
        "http://p/placement/allocation_candidates?page_size=10&node_data=true",
        "http://p/placement/allocation_candidates?m=1"]


@pytest.mark.parametrize("hostile, quoted", [
    ("../traits/CUSTOM_X", "..%2Ftraits%2FCUSTOM_X"),
    ("a?b#c", "a%3Fb%23c"),
    ("a%2Fb c", "a%252Fb%20c"),
])
def test_path_segments_are_quoted_with_nothing_kept_safe(hostile, quoted):
    session = Session([Resp(201, {}), Resp(204), Resp(204), Resp(200, {})])
    c = client_mod.PlacementClient("http://p/placement", session=session)
    c.put_report(hostile, "p", {})
    c.delete_allocations(hostile)
    c.put_allocations(hostile, {"allocations": {}}, "p", "u")
    c.finish_build_request(hostile, "failed")
    assert [url for _m, url, _kw in session.sent] == [
        f"http://p/placement/scheduling_reports/{quoted}",
        f"http://p/placement/allocations/{quoted}",
        f"http://p/placement/allocations/{quoted}",
        f"http://p/placement/build_requests/{quoted}"]
    for dots in (".", ".."):
        with pytest.raises(ValueError, match="cannot be a URL path segment"):
            c.delete_allocations(dots)
