"""``/healthcheck``: oslo.middleware's healthcheck, with a database check of ours.

``HealthcheckLayer`` hands ``/healthcheck`` to oslo.middleware's
``Healthcheck`` and everything else to the API. It sits outside keystone
(a load balancer has no token) and answers whatever the auth strategy.
oslo.middleware owns the answer: 200 with ``OK`` when every backend is
available, 503 otherwise; the details (reasons' details, threads, Python
version) only with ``[healthcheck] detailed = True``. A client outside
``[healthcheck] allowed_source_ranges`` (when set) falls through to the API,
which answers 404.

``DatabaseHealthcheck`` is the backend ``placement_database``
(entry point ``oslo.middleware.healthcheck``, on by default through
``[healthcheck] backends``): it reads the schema version on a connection of
its own, with a short connect and statement time limit, so a database that
is down, refusing connections, paused or missing the schema shows as
unhealthy within seconds, and a full request pool does not make a healthy
database look dead.
"""

import sqlalchemy as sa
from oslo_middleware import healthcheck
from oslo_middleware.healthcheck import pluginbase

from placement import conf as conf_mod

PATH = "/healthcheck"
# Seconds: a health check answers quickly or says "unhealthy".
CHECK_TIMEOUT = 3


class HealthcheckLayer:
    def __init__(self, application, conf):
        self.application = application
        self.healthcheck = healthcheck.Healthcheck(application, conf)

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == PATH:
            return self.healthcheck(environ, start_response)
        return self.application(environ, start_response)


def _check_engine(url):
    url = sa.engine.make_url(url)
    if url.get_backend_name() == "sqlite":
        connect_args = {"timeout": CHECK_TIMEOUT}
    else:
        connect_args = {
            "connect_timeout": CHECK_TIMEOUT,
            "options": f"-c statement_timeout={CHECK_TIMEOUT * 1000}",
        }
    # NullPool: one short-lived connection per check, none kept open.
    return sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=connect_args)


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """Available when the placement database answers a read of its schema version."""

    def __init__(self, oslo_conf, conf):
        super().__init__(oslo_conf, conf)
        self._engine = _check_engine(conf_mod.connection_url(oslo_conf))

    def healthcheck(self, server_port):
        try:
            with self._engine.connect() as conn:
                version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        except Exception as exc:  # any driver error means "cannot use it"
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            return pluginbase.HealthcheckResult(
                available=False,
                reason="database unavailable",
                details=detail[0] if detail else exc.__class__.__name__,
            )
        if version is None:
            return pluginbase.HealthcheckResult(
                available=False,
                reason="database has no schema",
                details="alembic_version is empty: run placement-manage db sync",
            )
        return pluginbase.HealthcheckResult(
            available=True, reason="database available", details=f"schema revision {version}"
        )
