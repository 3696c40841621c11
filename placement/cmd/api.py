"""placement-api: serve the placement API.

gunicorn runs the processes: one worker on SQLite (the embedded default: SQLite
allows one writer at a time anyway), several on PostgreSQL. Each worker is
placement.server.PlacementWorker: an asyncio loop reads whole requests, with
deadlines, and a thread pool runs the app (docs/decisions.md says why).
"""

import logging
import os
import shutil
import sys
import tempfile

from oslo_config import cfg

from placement import app as app_mod
from placement import connection_budget
from placement import host as host_mod
from placement import metrics
from placement import migration
from placement import server as server_mod
from placement.cmd import common

LOG = logging.getLogger("placement-api")

cli_opts = [
    cfg.StrOpt("host", default="127.0.0.1", help="Address to listen on."),
    cfg.PortOpt("port", default=8778, help="Port to listen on."),
    cfg.IntOpt(
        "workers",
        min=1,
        help="Worker processes (default: 1 on SQLite, the number of CPUs on PostgreSQL).",
    ),
    cfg.IntOpt("threads", default=8, min=1, help="Threads per worker process."),
]


def serve(app_factory, host, port, workers, threads, limits):
    import gc

    import gunicorn.app.base

    class Server(gunicorn.app.base.BaseApplication):
        # Read by PlacementWorker in each worker process.
        placement_limits = limits
        placement_threads = threads

        def load_config(self):
            self.cfg.set("bind", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
            self.cfg.set("workers", workers)
            self.cfg.set("worker_class", "placement.server.PlacementWorker")
            # placement.request_log writes the access lines (with request id
            # and latency); gunicorn's own would be a second, poorer copy.
            self.cfg.set("accesslog", None)
            self.cfg.set(
                "child_exit", lambda _arbiter, worker: metrics.mark_process_dead(worker.pid)
            )
            self.cfg.set("timeout", 120)

        def load(self):
            app = app_factory()
            # The worker's start-up objects (modules, app, SQLAlchemy metadata)
            # live forever: freeze them so the collector's full passes,
            # which large responses such as GET /allocation_candidates
            # trigger, stop walking them.
            gc.collect()
            gc.freeze()
            return app

    Server().run()


def _metrics_dir():
    """Put the workers' metrics in one directory (prometheus_client's
    multiprocess mode) so a scrape of any worker counts them all: the
    operator's ``PROMETHEUS_MULTIPROC_DIR`` (emptied), else a private temporary
    one, returned so that it is removed at exit."""
    path = metrics.multiprocess_dir()
    made = None
    if not path:
        path = made = tempfile.mkdtemp(prefix="placement-metrics-")
    metrics.use_multiprocess_dir(path)
    return made


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = "placement-api"

    def body():
        conf = common.parse_conf(argv, cli_opts=cli_opts, prog=prog)
        _check_noauth_address(conf)
        db = common.open_database(conf)
        workers = _workers(conf, db)
        metrics_dir = _metrics_dir()
        master = os.getpid()
        try:
            _prepare_database(conf, db, workers)
            _log_start(conf, db, workers)
            # Workers touch no database at boot: one (re)started while the
            # database is down answers 503s instead of failing to boot.
            serve(
                lambda: app_mod.create_app(conf, sync=False, check_database=False),
                conf.host,
                conf.port,
                workers,
                conf.threads,
                server_mod.Limits.from_conf(conf),
            )
        finally:
            # A gunicorn worker leaves through here too (SystemExit after fork).
            if metrics_dir is not None and os.getpid() == master:
                shutil.rmtree(metrics_dir, ignore_errors=True)

    return common.run(body, prog)


def _check_noauth_address(conf):
    noauth = conf.api.auth_strategy == "noauth2"
    if noauth and not host_mod.is_loopback(conf.host) and not conf.api.allow_insecure_noauth:
        raise common.StartupError(
            f"auth_strategy = noauth2 makes every caller an admin; refusing to listen on "
            f"non-loopback address {conf.host} (use auth_strategy = keystone, or set "
            "[api] allow_insecure_noauth = True on a private test network)",
            status=2,
        )


def _workers(conf, db):
    workers = conf.workers or (1 if not db.is_postgres else (os.cpu_count() or 2))
    if not db.is_postgres and workers > 1:
        LOG.warning("SQLite serves one writer at a time; using 1 worker process")
        workers = 1
    return workers


def _prepare_database(conf, db, workers):
    """Migrate/sync once, before forking, and check the connection budget;
    then close what that opened (each worker opens its own)."""
    try:
        app_mod.create_app(conf, db=db)
        connection_budget.check(db, workers)
    except migration.SchemaNotCurrent as exc:
        raise common.schema_error(exc)
    except Exception as exc:
        raise common.StartupError(f"cannot start: {exc}")
    db.dispose()
    metrics.forget_pool()


def _log_start(conf, db, workers):
    if conf.api.auth_strategy == "noauth2":
        LOG.warning(
            "auth_strategy = noauth2: development mode, any token is accepted and "
            "'admin' is an admin; %s",
            (
                f"INSECURE: listening on {conf.host} and answering any Host "
                "([api] allow_insecure_noauth)"
                if conf.api.allow_insecure_noauth
                else "answering only requests addressed to loopback names"
            ),
        )
    LOG.info(
        "placement API on http://%s:%s (%d worker(s), %s)",
        conf.host,
        conf.port,
        workers,
        db.dialect,
    )


if __name__ == "__main__":
    sys.exit(main())
