"""Version discovery, microversion negotiation, request ids and error format."""

import pytest


def test_root_needs_no_token(client):
    resp = client.get("/", headers={"x-auth-token": ""}, version="")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["versions"][0]["max_version"] == "1.39"
    assert body["versions"][0]["min_version"] == "1.0"
    assert resp.headers["x-openstack-request-id"].startswith("req-")


def test_microversion_headers(client):
    resp = client.get("/", version="1.20")
    assert resp.headers["openstack-api-version"] == "placement 1.20"
    assert "openstack-api-version" in resp.headers["vary"].lower()
    resp = client.get("/", version="latest")
    assert resp.headers["openstack-api-version"] == "placement 1.39"
    resp = client.get("/", version="")
    assert resp.headers["openstack-api-version"] == "placement 1.0"


@pytest.mark.parametrize("value,status", [("1.40", 406), ("2.0", 406), ("1.a", 400), ("one", 400)])
def test_bad_microversion(client, value, status):
    resp = client.get("/", version=value)
    assert resp.status_code == status
    err = resp.get_json()["errors"][0]
    assert err["status"] == status
    assert "Invalid microversion" in err["detail"]
    if status == 406:
        assert err["max_version"] == "1.39"
        assert err["min_version"] == "1.0"


def test_missing_token_is_401(client):
    resp = client.get("/resource_providers", headers={"x-auth-token": None})
    assert resp.status_code == 401


def test_unknown_path_404_json(client):
    resp = client.get("/no_such_thing", version="1.23")
    assert resp.status_code == 404
    err = resp.get_json()["errors"][0]
    assert err["code"] == "placement.undefined_code"
    assert err["request_id"] == resp.headers["x-openstack-request-id"]


def test_error_code_only_from_1_23(client):
    resp = client.get("/no_such_thing", version="1.22")
    assert "code" not in resp.get_json()["errors"][0]


def test_405_with_allow(client):
    resp = client.request("PATCH", "/resource_providers")
    assert resp.status_code == 405
    assert set(resp.headers["allow"].split(", ")) == {"GET", "POST"}
    assert "The method PATCH is not allowed" in resp.get_json()["errors"][0]["detail"]


def test_vary_names_the_microversion_header_in_lower_case(client):
    resp = client.get("/", version="1.20")
    assert "openstack-api-version" in resp.headers.get_all("vary")


def test_root_caching_headers_from_1_15(client):
    resp = client.get("/", version="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith(" GMT")
    resp = client.get("/", version="1.14")
    assert "last-modified" not in resp.headers
    assert "cache-control" not in resp.headers


def test_unknown_path_is_404_whatever_the_accept(client):
    resp = client.get("/moo", headers={"accept": "text/plain"})
    assert resp.status_code == 404
    assert "The resource could not be found" in resp.get_data(as_text=True)


def test_body_without_content_type_is_400(client):
    resp = client.request(
        "POST", "/resource_providers", data=b"I want a provider", headers={"content-type": None}
    )
    assert resp.status_code == 400
    assert "content-type header required" in resp.get_json()["errors"][0]["detail"]


def test_content_length_not_an_integer_is_400(app):
    # The test client computes content-length itself; override it in the environ.
    resp = app.test_client().post(
        "/resource_providers",
        data=b"{}",
        headers={"x-auth-token": "admin", "content-type": "application/json"},
        environ_overrides={"CONTENT_LENGTH": "hi mom"},
    )
    assert resp.status_code == 400
    assert "content-length header must be an integer" in resp.get_json()["errors"][0]["detail"]


def test_head_is_405_as_upstream(client):
    resp = client.request("HEAD", "/resource_providers")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "GET, POST"
    assert resp.get_data() == b""


def test_allow_lists_methods_in_upstream_order(client):
    resp = client.request("PATCH", "/resource_providers/" + "a" * 32)
    assert resp.status_code == 405
    assert resp.headers["allow"] == "GET, DELETE, PUT"
    detail = resp.get_json()["errors"][0]["detail"]
    assert detail == (
        "The method PATCH is not allowed for this resource. \n\n "
        "The method specified is not allowed for this resource."
    )
    assert "openstack-api-version" in resp.headers.get_all("vary")


def test_error_json_is_spaced_like_upstream(client):
    resp = client.get("/no_such_thing", version="1.23")
    assert resp.headers["content-type"] == "application/json"
    body = resp.get_data(as_text=True)
    assert body.startswith('{"errors": [{"status": 404, "title": "Not Found", ')
    assert resp.get_json()["errors"][0]["detail"] == "The resource could not be found.\n\n   "
    # Routing refusals come before upstream's handlers: no Vary.
    assert "vary" not in resp.headers


@pytest.mark.parametrize(
    "accept,media_type",
    [
        ("text/html", "text/html"),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"),
        ("application/json, text/html;q=0.5", "application/json"),
        ("*/*", "application/json"),
        ("text/plain", "text/plain"),
    ],
)
def test_error_body_follows_accept(client, accept, media_type):
    resp = client.get("/no_such_thing", headers={"accept": accept})
    assert resp.status_code == 404
    assert resp.mimetype == media_type
    assert "The resource could not be found." in resp.get_data(as_text=True)


def test_406_names_the_accept_header(client):
    resp = client.get("/", version="1.99", headers={"accept": None})
    detail = resp.get_json()["errors"][0]["detail"]
    assert detail == (
        "The resource could not be generated that was acceptable to your "
        "browser (content of type application/json. \n\n Invalid microversion: "
        "Unacceptable version header: 1.99"
    )
    resp = client.get("/resource_providers", headers={"accept": "text/html"})
    assert resp.status_code == 406
    assert resp.mimetype == "text/html"
    assert "(content of type text/html." in resp.get_data(as_text=True)


def test_415_names_the_media_type(client):
    resp = client.request(
        "POST", "/resource_providers", data=b"x", headers={"content-type": "text/plain"}
    )
    assert resp.status_code == 415
    assert resp.get_json()["errors"][0]["detail"] == (
        "The request media type text/plain is not supported by this server. \n\n "
        "The media type text/plain is not supported, use application/json"
    )


def test_multi_line_details_arrive_on_one_line(client):
    resp = client.get("/resource_providers?uuid=abc", version="1.23")
    assert resp.status_code == 400
    detail = resp.get_json()["errors"][0]["detail"]
    head, _sep, rest = detail.partition("\n\n ")
    assert head.startswith("The server could not comply")
    assert "\n" not in rest
    assert "'abc' is not a 'uuid'  Failed validating 'format'" in rest


@pytest.mark.parametrize(
    "path,status",
    [
        ("/resource_providers/%00", 404),
        ("/resource_providers?name=a%00b", 400),
        ("/traits?name=in:%00", 400),
        ("/usages?project_id=%00", 400),
    ],
)
def test_nul_in_path_or_query(client, path, status):
    resp = client.get(path)
    assert resp.status_code == status
    assert "NUL" in resp.get_json()["errors"][0]["detail"]


def test_nul_in_json_body_is_400_and_changes_nothing(client):
    resp = client.post("/resource_providers", json={"name": "a\x00b"})
    assert resp.status_code == 400
    assert "NUL" in resp.get_json()["errors"][0]["detail"]
    assert client.get("/resource_providers").get_json()["resource_providers"] == []


def test_request_id_outside_flask(app):
    # A response made by an outer WSGI layer (here: a bare 401 from a wrapped
    # middleware stand-in) still carries the request id header.
    from placement import request_id

    def bare_401(environ, start_response):
        start_response("401 Unauthorized", [("Content-Type", "text/plain")])
        return [b"no"]

    wrapped = request_id.RequestIdMiddleware(bare_401)
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen.update(dict(headers))

    wrapped({"REQUEST_METHOD": "GET", "PATH_INFO": "/x"}, start_response)
    assert seen["x-openstack-request-id"].startswith("req-")
