"""Shared fixtures: a clean database per test on SQLite and on PostgreSQL.

Every test that takes ``db`` (or ``app``/``client``/``live_server``) runs twice,
``[sqlite]`` and ``[postgresql]``. PostgreSQL comes from PLACEMENT_TEST_DB_URL,
else the local server at 127.0.0.1:5432 (user postgres) if it answers, else a
testcontainers container where Docker runs. Each run creates its databases
with a random suffix and drops them at the end. Without any of them the PostgreSQL
variants are skipped with the reason, except under CI=true, where that fails.
"""

import contextlib
import logging
import os
import shutil
import threading
import uuid

import pytest
import sqlalchemy as sa
import werkzeug.serving

from placement import app as app_mod
from placement import conf as conf_mod
from placement import db as db_mod
from placement import migration
from placement import models

LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _pg_admin_url():
    url = os.environ.get("PLACEMENT_TEST_DB_URL")
    if url:
        return url, None
    try:
        eng = sa.create_engine(LOCAL_PG, connect_args={"connect_timeout": 3})
        with eng.connect():
            pass
        eng.dispose()
        return LOCAL_PG, None
    except Exception as exc:  # noqa: BLE001 - any failure means "not here"
        local_error = str(exc).splitlines()[0]
    try:
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:  # testcontainers before 4.15
            from testcontainers.postgres import PostgresContainer

        container = PostgresContainer("postgres:15", driver="psycopg")
        container.start()
        return container.get_connection_url(), container
    except Exception as exc:  # noqa: BLE001
        return None, f"no PostgreSQL: local server: {local_error}; testcontainers: {exc}"


@pytest.fixture(autouse=True)
def _restore_logging():
    """A console script's main() run in-process sets oslo.log up on the root
    logger (handlers bound to that test's captured stderr); put the root
    logger back so the next test logs as pytest expects."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def pg_database_url(pg_admin_url):
    """URL of a PostgreSQL database private to this test process, migrated to head."""
    # A random suffix, so that test runs of two checkouts (or two runs of
    # one) can share a server without dropping each other's database.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with new_pg_database(pg_admin_url, f"placement_test_{worker}") as url:
        db = db_mod.Database(url)
        migration.upgrade(db)
        db.dispose()
        yield url


@pytest.fixture(scope="session")
def pg_admin_url():
    """A URL with the right to create databases on the test PostgreSQL server."""
    admin_url, extra = _pg_admin_url()
    if admin_url is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires PostgreSQL: {extra}")
        pytest.skip(extra)
    yield admin_url
    if extra is not None and hasattr(extra, "stop"):
        extra.stop()


@contextlib.contextmanager
def new_pg_database(admin_url, prefix):
    """A new, empty database ``<prefix>_<random>`` on the server of
    ``admin_url``; its URL. Dropped after, its connections ended first."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.engine.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            )
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db_url(request, tmp_path):
    """The URL of a new, empty database (no schema) on each backend; dropped after."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.sqlite"
        return
    with new_pg_database(request.getfixturevalue("pg_admin_url"), "placement_empty") as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """A migrated SQLite file that each test copies (migrating per test is slow)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite"
    db = db_mod.Database(f"sqlite:///{path}")
    migration.upgrade(db)
    db_mod.sync_standard_classes_and_traits(db)
    db.dispose()
    return path


def _truncate_all(db):
    tables = [t.name for t in reversed(models.metadata.sorted_tables)]
    with db.write() as conn:
        conn.exec_driver_sql(
            "TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE"
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A clean, migrated database URL for one test, on each backend."""
    if request.param == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        path = tmp_path / "placement.sqlite"
        shutil.copy(template, path)
        yield f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("pg_database_url")
        db = db_mod.Database(url)
        _truncate_all(db)
        db.dispose()
        yield url


@pytest.fixture
def db(db_url):
    database = db_mod.Database(db_url)
    db_mod.sync_standard_classes_and_traits(database)
    yield database
    database.dispose()


def make_conf(db_url, **overrides):
    """A fresh ConfigOpts on ``db_url``; overrides as {"group.option": value}."""
    values = {("placement_database", "connection"): db_url, ("api", "auth_strategy"): "noauth2"}
    for key, value in overrides.items():
        group, name = key.split(".")
        values[(group, name)] = value
    return conf_mod.make_conf(overrides=values)


@pytest.fixture
def conf(db_url):
    return make_conf(db_url)


@pytest.fixture
def app(conf, db):
    return app_mod.create_app(conf, db=db, sync=False)


class ApiClient:
    """Flask test client that speaks to the API as an admin at a chosen microversion."""

    def __init__(self, flask_client, version="latest", token="admin"):
        self._client = flask_client
        self.version = version
        self.token = token

    def _headers(self, headers, version):
        out = {"x-auth-token": self.token, "accept": "application/json"}
        ver = version if version is not None else self.version
        if ver:
            out["openstack-api-version"] = f"placement {ver}"
        out.update(headers or {})
        # A header given as None is left out (e.g. to send no token at all).
        return {k: v for k, v in out.items() if v is not None}

    def request(self, method, path, json=None, headers=None, version=None, data=None):
        kwargs = {"headers": self._headers(headers, version)}
        if json is not None:
            kwargs["json"] = json
        if data is not None:
            kwargs["data"] = data
        return self._client.open(path, method=method, **kwargs)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json=None, **kw):
        return self.request("POST", path, json=json, **kw)

    def put(self, path, json=None, **kw):
        return self.request("PUT", path, json=json, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


@pytest.fixture
def client(app):
    return ApiClient(app.test_client())


class LiveServer:
    def __init__(self, app):
        self._server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._thread.join(timeout=10)


@pytest.fixture
def live_server(app):
    """The app served over real HTTP on 127.0.0.1 in a background thread."""
    server = LiveServer(app).start()
    yield server
    server.stop()


def new_uuid():
    return str(uuid.uuid4())
