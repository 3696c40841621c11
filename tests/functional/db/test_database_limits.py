"""Database time limits and errors as the API shows them.

A database that refuses connections, a lock held past ``lock_timeout`` (or
SQLite's busy timeout) and a statement past ``statement_timeout`` are 503s in
the API's error format with Retry-After and placement.database.unavailable,
logged in one line with the request id; a write whose client hung up before
it committed is rolled back. The whole-service fault campaign (restarts and a
paused server) is tests/functional/db/test_database_faults.py.
"""

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid

import pytest
import requests
import sqlalchemy as sa

from placement import app as app_mod
from placement import db as db_mod
from placement import errors
from placement import request_log
from tests import builders
from tests import conftest
from tests import processes

BIN = os.path.dirname(sys.executable)
PROJECT = "c8a4f2bb-6d2a-4f0e-9f5b-3c0f5c1e7a01"
USER = "e1b1a0c6-3c8c-47a8-b3f5-1d3a8c0a9b02"


def _assert_unavailable(resp):
    assert resp.status_code == 503, resp.get_data(as_text=True)
    assert resp.headers["Retry-After"] == str(errors.DATABASE_RETRY_AFTER)
    assert resp.headers["Content-Type"] == "application/json"
    (error,) = resp.get_json()["errors"]
    assert error["code"] == "placement.database.unavailable"
    assert error["status"] == 503
    assert error["request_id"] == resp.headers["x-openstack-request-id"]
    return error


def _client(url, db):
    return conftest.ApiClient(
        app_mod.create_app(conftest.make_conf(url), db=db, check_database=False).test_client()
    )


def test_refused_connection_is_503_with_one_log_line(caplog):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{processes.free_port()}/placement"
    db = db_mod.Database(url, limits=db_mod.Limits(connect_timeout=2))
    client = _client(url, db)
    try:
        caplog.handler.addFilter(request_log.RequestIdLogFilter())
        with caplog.at_level(logging.WARNING):
            resp = client.get("/resource_providers")
            write = client.post("/resource_providers", json={"name": "x"})
        error = _assert_unavailable(resp)
        _assert_unavailable(write)
        assert "retry later" in error["detail"]
        lines = [r for r in caplog.records if "database unavailable" in r.getMessage()]
        assert len(lines) == 2
        assert lines[0].request_id == resp.headers["x-openstack-request-id"]
        assert "Connection refused" in lines[0].getMessage()
        assert all(r.exc_info is None for r in caplog.records)
        assert "Traceback" not in caplog.text
        # Before 1.23 the body has no code, as upstream; still 503 + Retry-After.
        old = client.get("/resource_providers", version="1.22")
        assert old.status_code == 503 and "Retry-After" in old.headers
        assert "code" not in old.get_json()["errors"][0]
    finally:
        db.dispose()


@pytest.fixture
def limited(db_url):
    """An API on a database with short limits, plus a raw engine to hold locks."""
    limits = db_mod.Limits(lock_timeout=1, sqlite_busy_timeout=1, statement_timeout=5)
    db = db_mod.Database(db_url, limits=limits)
    db_mod.sync_standard_classes_and_traits(db)
    rp = builders.create_provider(db, name="contended")
    builders.set_inventory(db, rp, "VCPU", 8, max_unit=8)
    holder = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    yield db, rp, holder
    holder.dispose()
    db.dispose()


def _hold_provider(holder, db, rp):
    """Open a transaction that locks ``rp`` as a concurrent allocation write
    would (PostgreSQL: the provider row FOR UPDATE; SQLite: the write lock)."""
    conn = holder.connect()
    if db.is_postgres:
        trans = conn.begin()
        conn.execute(
            sa.text("SELECT id FROM resource_providers WHERE uuid = :u FOR UPDATE"), {"u": rp}
        )
    else:
        conn.connection.dbapi_connection.isolation_level = None
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        trans = None
    return conn, trans


def _release(conn, trans):
    if trans is not None:
        trans.commit()
    else:
        conn.exec_driver_sql("COMMIT")
    conn.close()


def _claim_body(rp):
    """A new consumer's claim of 2 VCPU on ``rp`` (PUT /allocations/{consumer})."""
    return {
        "allocations": {rp: {"resources": {"VCPU": 2}}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": None,
    }


def _claim(client, rp, consumer):
    """PUT ``_claim_body(rp)`` for ``consumer`` (microversion 1.28)."""
    return client.put(f"/allocations/{consumer}", version="1.28", json=_claim_body(rp))


def test_lock_held_past_lock_timeout_is_503_and_writes_nothing(limited, db_url):
    db, rp, holder = limited
    client = _client(db_url, db)
    consumer = str(uuid.uuid4())
    conn, trans = _hold_provider(holder, db, rp)
    try:
        start = time.monotonic()
        resp = _claim(client, rp, consumer)
        elapsed = time.monotonic() - start
    finally:
        _release(conn, trans)
    _assert_unavailable(resp)
    # One lock wait (1 s), not one per allocation retry.
    assert elapsed < 3.5, elapsed
    assert client.get(f"/allocations/{consumer}").get_json()["allocations"] == {}
    # The lock gone, the same write goes through.
    resp = _claim(client, rp, consumer)
    assert resp.status_code == 204


def test_postgres_sessions_carry_the_limits(pg_database_url):
    """statement_timeout cancels a long statement (a 503 reason); the other
    limits are set on every session. (SQLite has no server to wait on.)"""
    db = db_mod.Database(pg_database_url, limits=db_mod.Limits(statement_timeout=0.5))
    try:
        start = time.monotonic()
        with pytest.raises(sa.exc.OperationalError) as info:
            with db.read() as conn:
                conn.exec_driver_sql("SELECT pg_sleep(5)")
        assert time.monotonic() - start < 3
        assert "statement timeout" in db_mod.unavailable_reason(info.value)
        with db.read() as conn:
            assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "5s"
            assert (
                conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == "10s"
            )
    finally:
        db.dispose()


def test_postgres_sessions_plan_each_statement_for_its_values(pg_database_url):
    """Prepared statements (psycopg prepares repeated ones) are planned for
    their values, not with a generic plan; an operator's options= in the
    database URL may still choose otherwise."""
    db = db_mod.Database(pg_database_url)
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_custom_plan"
    finally:
        db.dispose()
    url = sa.engine.make_url(pg_database_url).update_query_dict(
        {"options": "-c plan_cache_mode=auto"}
    )
    db = db_mod.Database(url.render_as_string(hide_password=False))
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "auto"
    finally:
        db.dispose()


def test_session_idle_in_transaction_is_ended(pg_database_url):
    """A transaction left idle (a stalled worker holding locks) is ended by the
    server after idle_in_transaction_timeout; its next statement is a 503 reason."""
    db = db_mod.Database(pg_database_url, limits=db_mod.Limits(idle_in_transaction_timeout=0.5))
    try:
        with pytest.raises(sa.exc.DBAPIError) as info:
            with db.read() as conn:
                conn.exec_driver_sql("SELECT 1")
                time.sleep(1.5)
                conn.exec_driver_sql("SELECT 1")
        assert "idle-in-transaction" in db_mod.unavailable_reason(info.value)
        with db.read() as conn:  # the pool hands out a live connection again
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        db.dispose()


def test_stalled_holder_of_provider_locks_is_ended(pg_database_url):
    """A worker that stalls (SIGSTOP, a GIL-bound thread) inside an allocation
    write holds its providers FOR UPDATE; the server ends its session after
    idle_in_transaction_timeout, so the next writer waits that long, not until
    the stalled worker wakes up."""
    limits = db_mod.Limits(idle_in_transaction_timeout=1, lock_timeout=5)
    db = db_mod.Database(pg_database_url, limits=limits)
    stalled = db_mod.Database(pg_database_url, limits=limits)
    try:
        db_mod.sync_standard_classes_and_traits(db)
        rp = builders.create_provider(db, name="held")
        builders.set_inventory(db, rp, "VCPU", 8, max_unit=8)
        client = _client(pg_database_url, db)
        holder = stalled.engine.connect()
        trans = holder.begin()
        holder.execute(
            sa.text("SELECT id FROM resource_providers WHERE uuid = :u FOR UPDATE"), {"u": rp}
        )
        # ... and the holder stalls here, idle in its transaction.
        start = time.monotonic()
        resp = _claim(client, rp, uuid.uuid4())
        elapsed = time.monotonic() - start
        assert resp.status_code == 204, resp.get_data(as_text=True)
        assert 0.5 < elapsed < 4, elapsed
        with pytest.raises(sa.exc.DBAPIError):
            trans.commit()  # the stalled worker wakes to a closed session
        holder.close()
    finally:
        stalled.dispose()
        db.dispose()


def test_programming_errors_stay_500(db):
    """Only 'cannot serve now' errors are 503s: a bug stays a 500."""
    # (sqlite3 calls an unknown column an OperationalError, psycopg a ProgrammingError.)
    with pytest.raises((sa.exc.ProgrammingError, sa.exc.OperationalError)) as info:
        with db.read() as conn:
            conn.exec_driver_sql("SELECT no_such_column FROM resource_providers")
    assert db_mod.unavailable_reason(info.value) is None
    with pytest.raises(sa.exc.IntegrityError) as info:
        with db.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO traits (id, name, created_at) VALUES (1, NULL, '2026-01-01')"
            )
    assert db_mod.unavailable_reason(info.value) is None


def _raw_put(port, path, body):
    """Send a PUT over a raw socket and return the socket, unread."""
    payload = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        (
            f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-auth-token: admin\r\n"
            "openstack-api-version: placement 1.28\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode()
        + payload
    )
    return sock


def test_write_for_a_client_that_hung_up_is_rolled_back(limited, db_url, caplog):
    db, rp, holder = limited
    # Long enough for the write to wait on the lock while the client leaves.
    db = db_mod.Database(db_url, limits=db_mod.Limits(lock_timeout=10, sqlite_busy_timeout=10))
    app = app_mod.create_app(conftest.make_conf(db_url), db=db, check_database=False)
    server = conftest.LiveServer(app).start()
    gone, stays = str(uuid.uuid4()), str(uuid.uuid4())
    body = _claim_body(rp)
    try:
        with caplog.at_level(logging.WARNING):
            conn, trans = _hold_provider(holder, db, rp)
            try:
                hangs_up = _raw_put(server.port, f"/allocations/{gone}", body)
                waits = _raw_put(server.port, f"/allocations/{stays}", body)
                time.sleep(1.0)  # both requests are now waiting on the lock
                hangs_up.close()
                time.sleep(0.2)
            finally:
                _release(conn, trans)
            waits.settimeout(15)
            answer = waits.recv(4096).decode()
            waits.close()
        assert answer.startswith("HTTP/1.1 204"), answer
        client = conftest.ApiClient(app.test_client())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any("client closed the connection" in r.getMessage() for r in caplog.records):
                break
            time.sleep(0.1)
        assert client.get(f"/allocations/{gone}").get_json()["allocations"] == {}
        assert client.get(f"/allocations/{stays}").get_json()["allocations"] != {}
        usage = client.get(f"/resource_providers/{rp}/usages").get_json()["usages"]
        assert usage == {"VCPU": 2}
        assert any(
            "client closed the connection before the write committed" in r.getMessage()
            for r in caplog.records
        )
    finally:
        server.stop()
        db.dispose()


def test_placement_api_rolls_back_the_write_of_a_client_that_hung_up(limited, db_url, tmp_path):
    """The same through placement-api's own server, a real process."""
    db, rp, holder = limited
    log_path = tmp_path / "api.log"
    env = dict(
        os.environ,
        OS_PLACEMENT_DATABASE__CONNECTION=db_url,
        OS_PLACEMENT_DATABASE__LOCK_TIMEOUT="10",
        OS_PLACEMENT_DATABASE__SQLITE_BUSY_TIMEOUT="10",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    api = processes.ApiProcess(log_path, ["--workers", "1"], env=env)
    port, url = api.port, api.url
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.28"}
    gone = str(uuid.uuid4())
    body = _claim_body(rp)
    try:
        conn, trans = _hold_provider(holder, db, rp)
        try:
            hangs_up = _raw_put(port, f"/allocations/{gone}", body)
            time.sleep(1.0)  # the write is waiting on the lock
            hangs_up.close()
            time.sleep(0.3)
        finally:
            _release(conn, trans)
        deadline = time.monotonic() + 15
        while "rolled back" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "client closed the connection before the write committed" in log_path.read_text()
        resp = requests.get(f"{url}/allocations/{gone}", headers=headers, timeout=10)
        assert resp.json()["allocations"] == {}
        # A client that stays gets its write.
        resp = requests.put(f"{url}/allocations/{gone}", headers=headers, json=body, timeout=30)
        assert resp.status_code == 204, resp.text
    finally:
        api.stop()


def test_sqlite_busy_timeout_is_the_option(tmp_path):
    url = f"sqlite:///{tmp_path}/busy.sqlite"
    db = db_mod.Database(url, limits=db_mod.Limits(sqlite_busy_timeout=0.5))
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 500
    finally:
        db.dispose()


def test_worker_boots_while_database_is_down(tmp_path):
    """create_app(check_database=False) does no I/O: a gunicorn worker that
    (re)starts during an outage serves 503s instead of failing to boot."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{processes.free_port()}/placement"
    conf = conftest.make_conf(url)
    app = app_mod.create_app(conf, sync=False, check_database=False)
    client = conftest.ApiClient(app.test_client())
    assert client.get("/").status_code == 200
    _assert_unavailable(client.get("/traits"))
    app.extensions["placement"].db.dispose()


def test_unresponsive_server_is_cut_off_by_the_watchdog():
    """A server that accepts TCP but never answers (a paused postmaster looks
    like this) costs a request connect_timeout, not for ever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel completes handshakes; nobody accepts
    port = listener.getsockname()[1]
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/placement"
    db = db_mod.Database(url, limits=db_mod.Limits(connect_timeout=2))
    client = _client(url, db)
    done = threading.Event()
    result = {}

    def call():
        start = time.monotonic()
        result["resp"] = client.get("/resource_providers")
        result["elapsed"] = time.monotonic() - start
        done.set()

    threading.Thread(target=call, daemon=True).start()
    try:
        assert done.wait(15), "request still waiting on a silent server"
        _assert_unavailable(result["resp"])
        assert 1.5 < result["elapsed"] < 6, result["elapsed"]
    finally:
        listener.close()
        db.dispose()
