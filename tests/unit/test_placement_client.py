"""joule.placement_client: paging, the error model, retries, quoting, options.

The transport below keystoneauth is a fake requests session answering real
``requests.Response`` objects, so everything above it (keystoneauth's
session and adapter, our retry loop, the error mapping) runs as in production.
"""

import json

import pytest
import requests
from oslo_config import cfg

from joule import placement_client as pc


def resp(status, body=None, headers=None):
    r = requests.Response()
    r.status_code = status
    r._content = b"" if body is None else json.dumps(body).encode()
    r.headers.update({"Content-Type": "application/json", **(headers or {})})
    return r


def err(status, detail, code="placement.undefined_code", headers=None):
    return resp(
        status,
        {
            "errors": [
                {
                    "status": status,
                    "title": "x",
                    "code": code,
                    "detail": f"Generic explanation.\n\n {detail}  ",
                }
            ]
        },
        headers,
    )


class Transport(requests.Session):
    """Answers queued responses (or raises queued exceptions) in order."""

    def __init__(self, answers):
        super().__init__()
        self.answers = list(answers)
        self.sent = []

    def request(self, method, url, **kwargs):
        self.sent.append((method, url, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        answer.url = url
        return answer


def client(answers, token="admin", **kwargs):
    transport = Transport(answers)
    sleeps = []
    c = pc.PlacementClient.for_endpoint("http://p/", token=token, sleep=sleeps.append, **kwargs)
    c.adapter.session.session = transport
    return c, transport, sleeps


def test_walks_next_links_with_node_data():
    c, t, _ = client(
        [
            resp(
                200,
                {
                    "allocation_requests": [1],
                    "links": [
                        {"rel": "next", "href": "/allocation_candidates?x=1&page_marker=abc"}
                    ],
                },
            ),
            resp(200, {"allocation_requests": [2], "links": []}),
        ]
    )
    pages = list(c.candidate_pages([("resources", "VCPU:1")], 50))
    assert [p["allocation_requests"] for p in pages] == [[1], [2]]
    assert t.sent[0][1].startswith(
        "http://p/allocation_candidates?resources=VCPU%3A1&page_size=50&node_data=true"
    )
    assert t.sent[1][1] == "http://p/allocation_candidates?x=1&page_marker=abc"
    headers = t.sent[0][2]["headers"]
    assert headers["openstack-api-version"] == "placement 1.39"
    assert headers["X-Auth-Token"] == "admin"


def test_next_link_under_a_prefix_and_links_that_leave_the_route():
    c, t, _ = client(
        [
            resp(200, {"links": [{"rel": "next", "href": "/placement/allocation_candidates?m=2"}]}),
            resp(200, {"links": []}),
        ]
    )
    c.adapter.endpoint_override = "http://p/placement"
    list(c.candidate_pages([], 10))
    assert t.sent[1][1] == "http://p/placement/allocation_candidates?m=2"
    for href in (
        "/traits/CUSTOM_X?m=1",
        "http://evil/allocation_candidates?m=1",
        "/allocation_candidates/../traits?m=1",
    ):
        c, t, _ = client([resp(200, {"links": [{"rel": "next", "href": href}]})])
        with pytest.raises(pc.PlacementError, match="leaves /allocation_candidates"):
            list(c.candidate_pages([], 10))
        assert len(t.sent) == 1


def test_a_repeating_next_link_stops_with_an_error():
    loop = {
        "allocation_requests": [],
        "links": [{"rel": "next", "href": "/allocation_candidates?m=1"}],
    }
    c, _, _ = client([resp(200, loop) for _ in range(3)])
    with pytest.raises(pc.PlacementError, match="paging did not terminate"):
        list(c.candidate_pages([], 10))


def test_nodes_and_workload_usages_follow_their_next_links():
    """Both listings page (placement.paging); the client answers every page,
    in order: the nodes a list, the usages one mapping."""
    c, t, _ = client(
        [
            resp(200, {"nodes": [{"uuid": "a"}], "links": [{"rel": "next", "href": "/nodes?m=1"}]}),
            resp(200, {"nodes": [{"uuid": "b"}], "links": [{"rel": "next", "href": "/nodes?m=2"}]}),
            resp(200, {"nodes": [{"uuid": "c"}], "links": []}),
            resp(
                200,
                {
                    "resource_providers": {"a": {"performance": 1}},
                    "links": [{"rel": "next", "href": "/workload_usages?m=1"}],
                },
            ),
            resp(200, {"resource_providers": {"b": {"performance": 2}}, "links": []}),
        ]
    )
    assert [n["uuid"] for n in c.list_nodes()] == ["a", "b", "c"]
    usages = c.workload_usages()
    assert list(usages.items()) == [("a", {"performance": 1}), ("b", {"performance": 2})]
    assert [url for _m, url, _kw in t.sent] == [
        "http://p/nodes?limit=10000",  # the largest page: one call up to 10,000
        "http://p/nodes?m=1",
        "http://p/nodes?m=2",
        "http://p/workload_usages?limit=10000",
        "http://p/workload_usages?m=1",
    ]
    # A link off the route is refused, as for the other listings.
    c, t, _ = client([resp(200, {"nodes": [], "links": [{"rel": "next", "href": "/traits?m=1"}]})])
    with pytest.raises(pc.PlacementError, match="leaves /nodes"):
        c.list_nodes()


def test_every_status_has_its_exception_under_one_base():
    c, _, _ = client(
        [
            err(
                409,
                "consumer generation conflict - expected null but got 1",
                "placement.concurrent_update",
            ),
            err(409, "Unable to allocate inventory"),
            err(400, "Invalid resource class in resources parameter"),
            err(404, "No consumer", "placement.undefined_code"),
            err(500, "boom"),
            err(401, "The request you have made requires authentication."),
            err(403, "Policy does not allow"),
        ]
    )
    areq = {"allocations": {"rp": {"resources": {"VCPU": 1}}}}
    with pytest.raises(pc.Conflict) as e1:
        c.put_allocations("c", areq, "p", "u")
    assert e1.value.consumer_conflict and e1.value.code == "placement.concurrent_update"
    with pytest.raises(pc.Conflict) as e2:
        c.put_allocations("c", areq, "p", "u")
    assert not e2.value.consumer_conflict
    with pytest.raises(pc.BadRequest) as e3:
        c.get_allocations("c")
    assert (e3.value.status, e3.value.detail) == (
        400,
        "Invalid resource class in resources parameter",
    )
    with pytest.raises(pc.NotFound) as e4:
        c.list_nodes()
    assert e4.value.route_missing
    with pytest.raises(pc.ServerError):
        c.workload_usages()
    with pytest.raises(pc.AuthenticationFailed):
        c.list_nodes()
    with pytest.raises(pc.PlacementError) as e7:
        c.list_nodes()
    assert type(e7.value) is pc.PlacementError and e7.value.status == 403
    for kind in (
        pc.PlacementUnreachable,
        pc.AuthenticationFailed,
        pc.BadRequest,
        pc.NotFound,
        pc.Conflict,
        pc.ServerError,
    ):
        assert issubclass(kind, pc.PlacementError)


def test_503_is_retried_honouring_retry_after_up_to_a_cap():
    c, t, sleeps = client(
        [
            err(503, "db down", headers={"Retry-After": "3"}),
            err(503, "db down", headers={"Retry-After": "3600"}),
            err(503, "db down"),
            resp(204),
        ]
    )
    # A write: 503 means placement did not carry it out, so it is retried.
    c.put_allocations("c", {"allocations": {}}, "p", "u")
    assert len(t.sent) == 4
    assert sleeps == [3.0, pc.RETRY_AFTER_CAP, pc.BASE_DELAY * 4]


def test_503_retries_are_bounded():
    c, t, sleeps = client([err(503, "db down") for _ in range(3)], status_code_retries=2)
    with pytest.raises(pc.ServerError) as exc:
        c.list_nodes()
    assert exc.value.status == 503 and len(t.sent) == 3
    assert sleeps == [pc.BASE_DELAY, pc.BASE_DELAY * 2]


def test_unclaim_is_idempotent_and_retried_when_unreachable():
    c, t, sleeps = client(
        [resp(204), err(404, "nothing"), requests.ConnectionError("Connection refused"), resp(204)],
        connect_retries=1,
    )
    c.delete_allocations("x")
    c.delete_allocations("x")
    c.delete_allocations("x")  # first attempt unreachable, retried
    assert len(t.sent) == 4 and sleeps == [pc.BASE_DELAY]


def test_claims_are_not_blindly_retried_when_unreachable():
    c, t, _ = client([requests.ConnectionError("Connection refused"), resp(204)], connect_retries=3)
    with pytest.raises(
        pc.PlacementUnreachable,
        match=r"^placement at http://p is unreachable \(PUT /allocations/c\): "
        "connection refused$",
    ):
        c.put_allocations("c", {"allocations": {}}, "p", "u")
    assert len(t.sent) == 1


@pytest.mark.parametrize(
    "bad_id", ["../traits/CUSTOM_X", "a/b", "x?y=1", "x#y", "%2e%2e", "..", ".", "a%2Fb c"]
)
def test_every_path_segment_is_quoted(bad_id):
    c, t, _ = client(
        [resp(204), resp(200, {"allocations": {}}), resp(200, {}), resp(200, {"status": "placed"})]
    )
    c.delete_allocations(bad_id)
    c.get_allocations(bad_id)
    c.put_report(bad_id, "p", {})
    c.finish_build_request(bad_id, "placed")
    for _method, url, _kw in t.sent:
        tail = url.rsplit("/", 1)[1]
        assert "/" not in tail.replace("%2F", "") and "?" not in url and "#" not in url
        assert url.count("/") == 4  # http://p/<route>/<one segment>
    assert t.sent[0][1] == "http://p/allocations/" + pc.url_path(bad_id)[1:]


def _conf(text, tmp_path, legacy="placement_client"):
    path = tmp_path / "c.conf"
    path.write_text(text)
    conf = cfg.ConfigOpts()
    pc.register_opts(conf, legacy)
    conf(args=["--config-file", str(path)], project="x", default_config_files=[])
    return conf


def test_deprecated_options_still_configure_the_client(tmp_path):
    conf = _conf(
        "[placement_client]\nendpoint = http://old:1234\ntoken = sekrit\n"
        "timeout = 7.5\nconnect_retries = 0\n",
        tmp_path,
    )
    c = pc.PlacementClient.from_conf(conf, "placement_client")
    assert c.endpoint == "http://old:1234"
    assert c.connect_retries == 0 and c.adapter.session.timeout == 7.5
    assert c.adapter.session.get_auth_headers(c.adapter.auth) == {"X-Auth-Token": "sekrit"}
    power = _conf(
        "[power]\nplacement_endpoint = http://p2:1\nrequest_timeout = 3\nplacement_token = t2\n",
        tmp_path,
        legacy="power",
    )
    c = pc.PlacementClient.from_conf(power, "power")
    assert (c.endpoint, c.adapter.session.timeout) == ("http://p2:1", 3.0)
    assert c.adapter.session.get_auth_headers(c.adapter.auth) == {"X-Auth-Token": "t2"}


def test_defaults_are_the_development_setup(tmp_path):
    c = pc.PlacementClient.from_conf(_conf("", tmp_path), "placement_client")
    assert c.endpoint == pc.DEFAULT_ENDPOINT
    # keystoneauth's noauth plugin: the token placement's noauth2 takes as admin.
    assert c.adapter.session.get_auth_headers(c.adapter.auth) == {"X-Auth-Token": "notused"}
    assert c.adapter.session.timeout == pc.DEFAULT_TIMEOUT
    conf = _conf(
        "[placement]\nendpoint_override = http://new:1\n"
        "[placement_client]\nendpoint = http://old:1\n",
        tmp_path,
    )
    assert pc.PlacementClient.from_conf(conf).endpoint == "http://new:1"


def test_password_auth_is_loaded_from_the_group(tmp_path):
    conf = _conf(
        "[placement]\nauth_type = password\nauth_url = http://keystone/v3\n"
        "username = sched\npassword = pw\nproject_name = service\n"
        "user_domain_id = default\nproject_domain_id = default\n"
        "region_name = RegionTwo\n",
        tmp_path,
    )
    pc.check_conf(conf)
    c = pc.PlacementClient.from_conf(conf)
    assert type(c.adapter.auth).__name__ == "Password"
    assert c.adapter.auth.auth_url == "http://keystone/v3"
    assert (c.adapter.service_type, c.adapter.region_name) == ("placement", "RegionTwo")
    assert c.adapter.interface == ["internal", "public"]


def test_errors_cross_a_process_boundary_intact():
    # The simulator runs its policies in a process pool: an error that
    # cannot be rebuilt from its pickle breaks the whole pool instead of
    # reaching the parent with placement's answer.
    import pickle

    refused = pc.BadRequest(
        "PUT", "/build_requests/leases", 400, "placement.undefined_code", "no", [{"a": 1}]
    )
    back = pickle.loads(pickle.dumps(refused))
    assert type(back) is pc.BadRequest
    assert (back.status, back.code, back.detail, back.items) == (
        400,
        "placement.undefined_code",
        "no",
        [{"a": 1}],
    )
    assert str(back) == str(refused)
    gone = pc.PlacementUnreachable("GET", "/", "http://127.0.0.1:1", "refused")
    back = pickle.loads(pickle.dumps(gone))
    assert (back.endpoint, back.reason, str(back)) == (gone.endpoint, "refused", str(gone))
