"""What the operability layers (access log, metrics, /healthcheck dispatch)
cost per request, measured in one run.

Usage (from the repository, with the package installed):

    python -m benchmarks.operability_overhead [--requests 1500] [--rounds 5]

Two apps in-process on one SQLite file: the shipped one, and the same app
with the access log, metrics and healthcheck layers taken off (request id
kept). Each round sends ``--requests`` sequential requests through Flask's
test client to each app, for two routes: ``GET /`` (no database) and
``GET /resource_providers/{uuid}`` (one read, a 404). The access log is
formatted as placement-api formats it and written to memory. Prints the
fastest round's microseconds per request for each app and the difference
(the fastest round is the one least disturbed by other load).
"""

import argparse
import io
import logging
import os
import tempfile
import time

from placement import app as app_mod
from placement import conf as conf_mod
from placement import healthcheck
from placement import metrics
from placement import request_id
from placement import request_log

HEADERS = {"x-auth-token": "admin"}
OPERABILITY_LAYERS = (
    request_id.RequestIdMiddleware,
    request_log.RequestLogMiddleware,
    metrics.MetricsMiddleware,
    healthcheck.HealthcheckLayer,
)
ROUTES = ("/", "/resource_providers/6e4b6a4e-0000-4000-8000-000000000000")


def _conf(url):
    return conf_mod.make_conf(overrides={("placement_database", "connection"): url})


def _without_layers(app):
    core = app.wsgi_app
    while isinstance(core, OPERABILITY_LAYERS):
        core = core.application
    app.wsgi_app = request_id.RequestIdMiddleware(core)
    return app


def _per_request_us(app, path, count):
    client = app.test_client()
    started = time.perf_counter()
    for _ in range(count):
        client.get(path, headers=HEADERS).get_data()
    return (time.perf_counter() - started) / count * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    access = logging.getLogger("placement.access")
    access.setLevel(logging.INFO)
    access.propagate = False
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s %(process)d %(levelname)s %(name)s [%(request_id)s] %(message)s"
        )
    )
    handler.addFilter(request_log.RequestIdLogFilter())
    access.addHandler(handler)

    with tempfile.TemporaryDirectory() as directory:
        url = "sqlite:///" + os.path.join(directory, "bench.sqlite")
        shipped = app_mod.create_app(_conf(url))
        bare = _without_layers(app_mod.create_app(_conf(url), sync=False))
        print(f"{'route':<60} {'shipped us':>10} {'bare us':>10} {'cost us':>8}")
        for path in ROUTES:
            with_layers, without = [], []
            for _ in range(args.rounds):
                with_layers.append(_per_request_us(shipped, path, args.requests))
                without.append(_per_request_us(bare, path, args.requests))
            best, base = min(with_layers), min(without)
            print(f"{path:<60} {best:>10.0f} {base:>10.0f} {best - base:>8.0f}")


if __name__ == "__main__":
    main()
