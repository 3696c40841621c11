"""Build request leases keep the database's time, not each API process's.

Two placement-api processes on one database, one of them with its clock an
hour off: what a lease taken through either says, and who may take it over,
is the same through both. The skewed process is the same app served apart
(its own Flask app on the same database), whose requests see a
``placement.db.utcnow`` an hour off, as a process whose clock is would.
"""

import contextvars
import datetime
import re
import time
import uuid

import pytest
import sqlalchemy as sa

from placement import app as app_mod
from placement import db as db_mod
from tests import builders
from tests import specs
from tests.conftest import ApiClient

LEASED = "placement.build_request.leased"
HOUR = datetime.timedelta(hours=1)
# A response's lease time: ISO 8601, UTC, to the whole second, as before.
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

_skew = contextvars.ContextVar("lease_clock_skew", default=None)


class _SkewedClient(ApiClient):
    """A client of the API process whose clock is ``offset`` off."""

    def __init__(self, flask_client, offset):
        super().__init__(flask_client)
        self.offset = offset

    def request(self, *args, **kwargs):
        token = _skew.set(self.offset)
        try:
            return super().request(*args, **kwargs)
        finally:
            _skew.reset(token)


@pytest.fixture
def skewed_clock(monkeypatch):
    """``placement.db.utcnow`` as a process with a skewed clock reads it,
    while a ``_SkewedClient``'s request runs (the other process's are exact)."""
    exact = db_mod.utcnow

    def utcnow():
        offset = _skew.get()
        return exact() if offset is None else exact() + offset

    monkeypatch.setattr(db_mod, "utcnow", utcnow)


def _process(conf, db, offset):
    """Another placement-api process on the same database, ``offset`` off."""
    return _SkewedClient(app_mod.create_app(conf, db=db, sync=False).test_client(), offset)


def _utc_now():
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def _create(api, owner=None, lease=60):
    instance = str(uuid.uuid4())
    body = {
        "instance_uuid": instance,
        "request_id": "req-clock",
        "spec": specs.build_request_spec(instance, "req-clock"),
    }
    if owner is not None:
        body.update(owner=owner, lease_seconds=lease)
    resp = api.post("/build_requests", json=body)
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()


def _lease(api, record, owner, seconds=60, hand_off=False):
    return api.put(
        f"/build_requests/{record['instance_uuid']}/lease",
        json={
            "owner": owner,
            "generation": record["generation"],
            "lease_seconds": seconds,
            "hand_off": hand_off,
        },
    )


def _expired(api):
    """The pending records a sweeping conductor would take over."""
    listed = api.get("/build_requests?status=pending&lease_expired=true").get_json()
    counted = api.get("/build_requests/counts?status=pending&lease_expired=true").get_json()
    return {r["instance_uuid"] for r in listed["build_requests"]}, counted


def _assert_expires_in_a_minute(record):
    stamp = record["lease_expires_at"]
    assert STAMP.match(stamp), stamp
    at = datetime.datetime.fromisoformat(stamp[:-1])
    ahead = (at - _utc_now()).total_seconds()
    assert 50 <= ahead <= 62, f"lease_expires_at {stamp} is {ahead:.0f} s from now, not 60"


def _held_through(slow, how):
    """A record held for 60 s by cond-a through the process ``slow``:
    created held, taken (a record nobody held), renewed, or handed off."""
    if how == "created":
        return _create(slow, owner="cond-a")
    if how == "taken":
        resp = _lease(slow, _create(slow), "cond-a")
    elif how == "renewed":
        resp = _lease(slow, _create(slow, owner="cond-a", lease=5), "cond-a")
    else:  # handed off: nobody's, reserved for the receiver for 60 s
        resp = _lease(slow, _create(slow, owner="cond-a", lease=5), "cond-a", hand_off=True)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


@pytest.mark.parametrize("how", ["created", "taken", "renewed", "handed off"])
@pytest.mark.usefixtures("skewed_clock")
def test_a_lease_written_through_a_slow_clock_is_live_to_the_others(client, conf, db, how):
    slow = _process(conf, db, -HOUR)
    record = _held_through(slow, how)
    _assert_expires_in_a_minute(record)
    # A correct process sweeping for dead conductors' work does not see it.
    listed, counted = _expired(client)
    assert record["instance_uuid"] not in listed
    assert counted["count"] == 0, counted
    listed, counted = _expired(slow)
    assert record["instance_uuid"] not in listed and counted["count"] == 0
    if how == "handed off":
        return  # nobody holds it: the receiver of the hand-off takes it
    # Nor can another conductor take it over, through either process.
    for api in (client, slow):
        resp = _lease(api, record, "cond-b")
        assert resp.status_code == 409, resp.get_json()
        assert resp.get_json()["errors"][0]["code"] == LEASED


@pytest.mark.usefixtures("skewed_clock")
def test_a_fast_clock_does_not_take_over_live_leases(client, conf, db):
    fast = _process(conf, db, HOUR)
    record = _create(client, owner="cond-b")
    _assert_expires_in_a_minute(record)
    listed, counted = _expired(fast)
    assert record["instance_uuid"] not in listed and counted["count"] == 0
    resp = _lease(fast, record, "cond-a")
    assert resp.status_code == 409 and resp.get_json()["errors"][0]["code"] == LEASED
    # What the fast process writes runs out when the database says so too.
    resp = _lease(fast, _create(fast), "cond-a")
    assert resp.status_code == 200
    _assert_expires_in_a_minute(resp.get_json())
    resp = _lease(client, resp.get_json(), "cond-b")
    assert resp.status_code == 409 and resp.get_json()["errors"][0]["code"] == LEASED


def test_a_lease_runs_out_by_the_database_clock(client, db):
    """A 1 s lease is live at once and runs out 1 to 2 s later (stored to
    the second) by the database's clock, through every process."""
    # The database's second before and after the create bracket the one the
    # lease was taken in (a second boundary may pass between them).
    with db.read() as conn:
        before = db_mod.now(conn, seconds=True)
    record = _create(client, owner="cond-a", lease=1)
    with db.read() as conn:
        after = db_mod.now(conn, seconds=True)
    assert STAMP.match(record["lease_expires_at"])
    expires = datetime.datetime.fromisoformat(record["lease_expires_at"][:-1])
    one = datetime.timedelta(seconds=1)
    assert before + one <= expires <= after + one
    while True:
        with db.read() as conn:
            if db_mod.now(conn) >= expires:
                break
        time.sleep(0.05)
    listed, counted = _expired(client)
    assert record["instance_uuid"] in listed and counted["count"] == 1
    resp = _lease(client, record, "cond-b")
    assert resp.status_code == 200 and resp.get_json()["owner"] == "cond-b"


@pytest.mark.usefixtures("skewed_clock")
def test_a_heartbeat_through_a_skewed_clock_is_aged_by_the_database(client, conf, db):
    """Node liveness is judged the same way (a guard: heartbeats were
    stamped and aged by the database's clock already)."""
    rp = builders.create_provider(db, name="cn-clock")
    assert client.put(f"/nodes/{rp}", json={"cell": "cell1"}).status_code == 201
    for offset in (-HOUR, HOUR):
        api = _process(conf, db, offset)
        assert api.post(f"/nodes/{rp}/heartbeat", json={}).status_code == 200
        for reader in (client, api):
            age = reader.get(f"/nodes/{rp}").get_json()["heartbeat_age_seconds"]
            assert 0 <= age < 30, (offset, age)


def test_leases_keep_utc_whatever_the_sessions_time_zone(conf, db, db_url):
    """PostgreSQL's clock is read in UTC, as the columns store it, whatever
    TimeZone the server or the operator's URL gives the session."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no session time zone")
    url = sa.engine.make_url(db_url).update_query_dict({"options": "-c TimeZone=Asia/Tokyo"})
    tokyo = db_mod.Database(url.render_as_string(hide_password=False))
    try:
        with tokyo.read() as conn:
            assert conn.exec_driver_sql("SHOW TimeZone").scalar() == "Asia/Tokyo"
        api = ApiClient(app_mod.create_app(conf, db=tokyo, sync=False).test_client())
        record = _create(api, owner="cond-a")
        _assert_expires_in_a_minute(record)
        listed, counted = _expired(api)
        assert record["instance_uuid"] not in listed and counted["count"] == 0
    finally:
        tokyo.dispose()
