"""What an operator sees of each request: access log, request ids in logs,
/healthcheck and /metrics (in-process, on SQLite and PostgreSQL).

The same endpoints through real server processes are in
tests/functional/ops/test_operability_processes.py.
"""

import json
import logging
import re

import pytest
import sqlalchemy as sa

from placement import metrics
from placement import request_log
from tests.conftest import new_uuid

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
LOOPBACK = {"REMOTE_ADDR": "127.0.0.1"}
# A database that refuses connections: nothing listens on port 1.
REFUSING = "postgresql+psycopg://postgres@127.0.0.1:1/placement"


def _get(flask_client, path, headers=None, remote="127.0.0.1"):
    resp = flask_client.get(path, headers=headers or {}, environ_base={"REMOTE_ADDR": remote})
    resp.get_data()  # a server reads the whole body; the request is done then
    return resp


def _samples(text, name):
    """{frozenset(labels.items()): value} of one metric in exposition text."""
    out = {}
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            out[frozenset(labels.items())] = float(match.group(2))
    return out


def _scrape(flask_client):
    resp = _get(flask_client, "/metrics")
    assert resp.status_code == 200
    assert resp.content_type.startswith("text/plain")
    return resp.get_data(as_text=True)


def _count(text, route, method, status):
    key = frozenset({"route": route, "method": method, "status": str(status)}.items())
    return _samples(text, "placement_api_requests_total").get(key, 0.0)


class _Lines(logging.Handler):
    """Records formatted the way placement-api formats them (request id filter)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self.addFilter(request_log.RequestIdLogFilter())
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s [%(request_id)s] %(message)s"))

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines():
    handler = _Lines()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(old_level)


def test_access_line_has_request_id_status_and_latency(flask_client, log_lines):
    resp = _get(flask_client, "/resource_providers?name=x", ADMIN)
    rid = resp.headers["x-openstack-request-id"]
    access = [line for line in log_lines if " placement.access " in line]
    assert len(access) == 1, log_lines
    line = access[0]
    assert f"request_id: {rid}" in line
    assert '"GET /resource_providers?name=x" status: 200' in line
    assert f"len: {len(resp.get_data())}" in line
    assert "microversion: 1.39" in line
    latency = float(re.search(r"time: ([0-9.]+)ms", line).group(1))
    assert 0 < latency < 60_000
    # A 401 made before the app looked at the request is logged too.
    resp = _get(flask_client, "/resource_providers")
    assert resp.status_code == 401
    assert any(
        "status: 401" in line and resp.headers["x-openstack-request-id"] in line
        for line in log_lines
    )


def test_error_lines_carry_the_request_id(app, flask_client, log_lines, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("policy store on fire")

    # Break something every handler uses: the uncaught-exception line (with
    # its traceback) must say which request it was.
    monkeypatch.setattr(app.extensions["placement"].enforcer, "authorize", broken)
    resp = _get(flask_client, "/resource_providers", ADMIN)
    assert resp.status_code == 500
    rid = resp.headers["x-openstack-request-id"]
    errors = [line for line in log_lines if line.startswith("ERROR ")]
    assert errors and all(f"[{rid}]" in line for line in errors), log_lines
    assert "policy store on fire" in "\n".join(errors)
    assert json.loads(resp.get_data())["errors"][0]["request_id"] == rid
    # Between requests nothing claims to belong to one.
    logging.getLogger("placement.test").warning("after the request")
    assert log_lines[-1] == "WARNING placement.test [-] after the request"


def test_metrics_count_route_templates_methods_and_statuses(flask_client):
    before = _scrape(flask_client)
    uuid = new_uuid()
    for _ in range(3):
        assert _get(flask_client, f"/resource_providers/{new_uuid()}", ADMIN).status_code == 404
    assert _get(flask_client, f"/resource_providers/{uuid}/nothing-here", ADMIN).status_code == 404
    assert _get(flask_client, "/resource_providers", ADMIN).status_code == 200
    resp = flask_client.delete("/", headers=ADMIN, environ_base=LOOPBACK)
    resp.get_data()
    assert resp.status_code == 405
    after = _scrape(flask_client)

    def delta(route, method, status):
        return _count(after, route, method, status) - _count(before, route, method, status)

    # Three different uuids, one label value: the route template.
    assert delta("/resource_providers/<uuid>", "GET", 404) == 3
    assert delta("unmatched", "GET", 404) == 1
    assert delta("/resource_providers", "GET", 200) == 1
    assert delta("/", "DELETE", 405) == 1
    assert uuid not in after
    histogram = _samples(after, "placement_api_request_duration_seconds_count")
    key = frozenset({"route": "/resource_providers/<uuid>", "method": "GET"}.items())
    old = _samples(before, "placement_api_request_duration_seconds_count").get(key, 0.0)
    assert histogram[key] - old == 3
    assert 'le="0.005"' in after and 'le="+Inf"' in after


def test_metrics_show_the_database_pool(flask_client, db):
    text = _scrape(flask_client)
    assert _samples(text, "placement_db_pool_size")[frozenset()] == db.engine.pool.size()
    # No request holds a connection while /metrics answers.
    assert _samples(text, "placement_db_pool_checked_out")[frozenset()] == 0
    # While one is held, the next request's checkout shows it.
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
        _get(flask_client, "/resource_providers", ADMIN)
        text = _scrape(flask_client)
        assert _samples(text, "placement_db_pool_checked_out")[frozenset()] == 1
    assert _samples(text, "placement_db_pool_overflow")[frozenset()] == 0


@pytest.mark.parametrize(
    "remote,headers",
    [
        ("192.0.2.7", {}),
        ("127.0.0.1", {"X-Forwarded-For": "192.0.2.7"}),
        ("127.0.0.1", {"Forwarded": "for=192.0.2.7"}),
    ],
    ids=["foreign-address", "x-forwarded-for", "forwarded"],
)
def test_metrics_hidden_from_other_sources(flask_client, remote, headers):
    # Like any unknown path: 404 with a token (401 without, auth comes first).
    resp = _get(flask_client, "/metrics", {**ADMIN, **headers}, remote=remote)
    assert resp.status_code == 404
    assert resp.get_json()["errors"][0]["code"] == "placement.undefined_code"


def test_metrics_source_ranges_and_disabling_are_configurable(make_flask_client):
    client = make_flask_client(**{"metrics.allowed_source_ranges": ["192.0.2.0/24"]})
    assert _get(client, "/metrics", remote="192.0.2.7").status_code == 200
    assert _get(client, "/metrics", ADMIN, remote="127.0.0.1").status_code == 404
    client = make_flask_client(**{"metrics.enabled": False})
    assert _get(client, "/metrics", ADMIN).status_code == 404


def test_metrics_bad_source_range_refuses_to_start(make_flask_client):
    with pytest.raises(ValueError, match="not-a-network"):
        make_flask_client(**{"metrics.allowed_source_ranges": ["not-a-network"]})


def test_route_label_of_every_route_is_its_template(app):
    middleware = app.wsgi_app
    while not isinstance(middleware, metrics.MetricsMiddleware):
        middleware = middleware.application
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<[^>]+>", "x", rule.rule)
        for method in rule.methods - {"OPTIONS"}:
            assert middleware.route_of(path, method) == rule.rule
    assert middleware.route_of("/healthcheck", "GET") == "/healthcheck"
    assert middleware.route_of("/resource_providers/", "GET") == "unmatched"


def test_healthcheck_ok_without_token(flask_client):
    resp = _get(flask_client, "/healthcheck")
    assert resp.status_code == 200
    assert resp.get_data(as_text=True) == "database available"
    assert resp.headers["x-openstack-request-id"].startswith("req-")
    resp = flask_client.get("/healthcheck", headers={"Accept": "application/json"})
    assert resp.status_code == 200
    # Not detailed by default: reasons only, no details, threads or versions.
    assert json.loads(resp.get_data()) == {"detailed": False, "reasons": ["database available"]}
    assert flask_client.head("/healthcheck").status_code == 204


def test_healthcheck_detailed_only_when_configured(make_flask_client):
    client = make_flask_client(**{"healthcheck.detailed": True})
    body = json.loads(client.get("/healthcheck", headers={"Accept": "application/json"}).data)
    assert body["detailed"] is True
    assert body["reasons"][0]["reason"] == "database available"
    assert body["reasons"][0]["details"].startswith("schema revision ")


def test_healthcheck_unhealthy_when_database_refuses(make_flask_client):
    # The API's own pool is fine; the database the service is configured
    # for refuses connections (nothing listens on port 1).
    client = make_flask_client(REFUSING, **{"healthcheck.detailed": True})
    resp = client.get("/healthcheck")
    assert resp.status_code == 503
    assert resp.get_data(as_text=True) == "database unavailable"
    body = json.loads(client.get("/healthcheck", headers={"Accept": "application/json"}).data)
    assert "refused" in body["reasons"][0]["details"].lower()


def test_healthcheck_unhealthy_without_schema(db, make_flask_client):
    client = make_flask_client()
    assert client.get("/healthcheck").status_code == 200
    with db.write() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        conn.execute(sa.text("DELETE FROM alembic_version"))
    try:
        resp = client.get("/healthcheck")
        assert resp.status_code == 503
        assert resp.get_data(as_text=True) == "database has no schema"
    finally:
        # The PostgreSQL database is shared by this worker's later tests.
        with db.write() as conn:
            conn.execute(sa.text("INSERT INTO alembic_version VALUES (:v)"), {"v": version})
    assert client.get("/healthcheck").status_code == 200


def test_healthcheck_backends_are_configurable(make_flask_client):
    # Without our database backend oslo.middleware reports healthy on its own.
    client = make_flask_client(REFUSING, **{"healthcheck.backends": []})
    assert client.get("/healthcheck").status_code == 200


def test_root_and_routes_unchanged(flask_client):
    resp = _get(flask_client, "/")
    assert resp.status_code == 200
    assert resp.get_json()["versions"][0]["max_version"] == "1.39"
    assert _get(flask_client, "/healthcheck/extra", ADMIN).status_code == 404
