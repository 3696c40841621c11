"""The fixtures the functional tests share, defined once.

The databases (``db``, ``db_url``, ``app``, ``client``, ``live_server``,
``empty_db_url``: each test on SQLite and PostgreSQL) are tests/conftest.py's;
here are the functional tests' own:

- ``flask_client`` and ``make_flask_client``: Flask test clients of the app on
  this test's database, as it is or configured otherwise;
- ``empty_pg_url``: a new, empty PostgreSQL database (no schema);
- ``private_pg``: a PostgreSQL server of the test's own, to stop and pause
  (tests/private_postgres.py);
- ``keystone``: the fake identity service (tests/keystone.py), started;
- ``vhost``: a RabbitMQ virtual host of the test's own.

The services over the in-memory bus are ``tests.bus.in_process``.
"""

import os
import shutil
import socket
import subprocess
import uuid

import pytest

from placement import app as app_mod
from tests import conftest
from tests import keystone as keystone_mod
from tests import private_postgres

RABBIT = ("127.0.0.1", 5672)


def _unavailable(what, reason):
    """Skip for want of ``what``; under CI=true, fail instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires {what}: {reason}")
    pytest.skip(str(reason))


@pytest.fixture
def flask_client(app):
    """The Flask test client of this test's app (no headers of its own;
    ``client`` is the admin's)."""
    return app.test_client()


@pytest.fixture
def make_flask_client(db, db_url):
    """A factory: ``make_flask_client(**{"group.option": value})`` is the
    Flask test client of a new app on this test's database, configured with
    those options (tests.conftest.make_conf); ``url`` is the
    [placement_database] connection it is configured with, if not this
    test's database."""

    def make(url=None, **overrides):
        conf = conftest.make_conf(url or db_url, **overrides)
        return app_mod.create_app(conf, db=db, sync=False).test_client()

    return make


@pytest.fixture
def empty_pg_url(pg_admin_url):
    """A new, empty PostgreSQL database (no schema) with a random name; dropped after."""
    with conftest.new_pg_database(pg_admin_url, "placement_empty") as url:
        yield url


@pytest.fixture
def private_pg():
    """A PostgreSQL server of this test's own with a database ``placement``,
    to stop, restart and pause; removed after."""
    try:
        pg = private_postgres.PrivatePostgres()
    except private_postgres.NotAvailable as exc:
        _unavailable("the PostgreSQL server binaries", exc)
    try:
        pg.init().start()
        pg.createdb()
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def keystone_class():
    """What ``keystone`` starts; a test module overrides this fixture to
    start a subclass of FakeKeystone."""
    return keystone_mod.FakeKeystone


@pytest.fixture
def keystone(keystone_class):
    """The fake identity service on 127.0.0.1, started; stopped after."""
    server = keystone_class().start()
    yield server
    server.stop()


def _rabbit_up():
    try:
        with socket.create_connection(RABBIT, timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def vhost():
    """A RabbitMQ virtual host of this test only."""
    ctl = shutil.which("rabbitmqctl")
    if not _rabbit_up() or ctl is None:
        _unavailable(
            "RabbitMQ", "no RabbitMQ at 127.0.0.1:5672 (or no rabbitmqctl to make a vhost)"
        )
    name = f"joule-test-{uuid.uuid4().hex[:12]}"
    for args in (["add_vhost", name], ["set_permissions", "-p", name, "guest", ".*", ".*", ".*"]):
        res = subprocess.run([ctl, *args], capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            _unavailable("RabbitMQ", f"rabbitmqctl {args[0]} failed: {res.stderr.strip()[:200]}")
    yield name
    subprocess.run([ctl, "delete_vhost", name], capture_output=True, timeout=60)
