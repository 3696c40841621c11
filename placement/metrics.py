"""Prometheus metrics of the API: requests, latency, database pool use.

Served at ``/metrics`` on the API port by ``MetricsMiddleware`` (an outer WSGI
layer, outside keystone: a scraper has no token), only to clients in
``[metrics] allowed_source_ranges`` whose request carries no proxy header;
anyone else gets the API's 404, as if the path did not exist
(docs/decisions.md says why).

Labels are bounded: ``route`` is the route template (``/resource_providers/<uuid>``),
``unmatched`` for a path no route knows; ``method`` is one of the HTTP methods
below or ``other``; ``status`` is the numeric status.

Several worker processes: prometheus_client's multiprocess mode. When
``PROMETHEUS_MULTIPROC_DIR`` is set each process writes its samples to files
there and a scrape of any worker sums them all. ``placement-api`` sets it up
itself (``use_multiprocess_dir``, before the first metric exists); under
uwsgi or mod_wsgi with several processes the operator sets the variable
(docs/architecture.md). prometheus_client is imported lazily, so that
placement-api can choose the mode before it decides how values are stored.
"""

import glob
import ipaddress
import os
import threading
import time

import werkzeug.exceptions

from placement import request_log

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
METRICS_PATH = "/metrics"
# Paths answered outside Flask's routing; they are their own route label.
OWN_PATHS = ("/healthcheck", METRICS_PATH)
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
UNMATCHED = "unmatched"
# Headers a reverse proxy adds: such a request came from beyond the proxy,
# whatever REMOTE_ADDR says.
PROXY_HEADERS = (
    "HTTP_FORWARDED",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_REAL_IP",
)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_lock = threading.Lock()
_metrics = None


def multiprocess_dir():
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower())


def use_multiprocess_dir(path):
    """Store samples under ``path`` (emptied first), for every process forked
    from now on. Call before the first metric is created."""
    if _metrics is not None:
        raise RuntimeError("metrics already created in single-process mode")
    os.makedirs(path, exist_ok=True)
    for stale in glob.glob(os.path.join(path, "*.db")):
        os.unlink(stale)
    os.environ[MULTIPROC_ENV] = path
    # prometheus_client picks the value store when it is first imported;
    # choose again in case something imported it before the variable was set.
    from prometheus_client import values

    values.ValueClass = values.get_value_class()


def mark_process_dead(pid):
    """Drop a dead worker's live gauges (gunicorn's child_exit hook)."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


class _Metrics:
    def __init__(self):
        import prometheus_client as prom

        multiproc = bool(multiprocess_dir())
        # In multiprocess mode the samples live in files and a scrape reads
        # them through MultiProcessCollector; registering here would count twice.
        self.registry = None if multiproc else prom.CollectorRegistry()
        reg = {"registry": self.registry}
        self.requests = prom.Counter(
            "placement_api_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            **reg,
        )
        self.latency = prom.Histogram(
            "placement_api_request_duration_seconds",
            "Time from the request's arrival "
            "to the last byte of its response, by route template and method.",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            **reg,
        )
        gauge = {"multiprocess_mode": "livesum", **reg}
        self.pool_size = prom.Gauge(
            "placement_db_pool_size",
            "Connections the database pool keeps "
            "([placement_database] pool_size), summed over worker processes.",
            **gauge,
        )
        self.pool_checked_out = prom.Gauge(
            "placement_db_pool_checked_out",
            "Database connections in use by requests, summed over worker processes.",
            **gauge,
        )
        self.pool_overflow = prom.Gauge(
            "placement_db_pool_overflow",
            "Database connections open beyond pool_size "
            "(up to max_overflow), summed over worker processes.",
            **gauge,
        )


def get():
    """This process's metric objects, created on first use."""
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                _metrics = _Metrics()
    return _metrics


def exposition():
    """(body, content type) of a scrape: every process's samples in multiprocess mode."""
    import prometheus_client as prom

    metrics = get()
    if metrics.registry is None:
        from prometheus_client import multiprocess

        registry = prom.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = metrics.registry
    return prom.generate_latest(registry), prom.CONTENT_TYPE_LATEST


def record_pool(pool):
    """Set the pool gauges from ``pool`` now (a QueuePool; others are skipped)."""
    if not (hasattr(pool, "checkedout") and hasattr(pool, "overflow")):
        return
    metrics = get()
    metrics.pool_size.set(pool.size())
    metrics.pool_checked_out.set(pool.checkedout())
    # QueuePool counts overflow from -pool_size: negative while the pool
    # has not yet opened pool_size connections.
    metrics.pool_overflow.set(max(0, pool.overflow()))


def instrument_engine(engine):
    """Keep the pool gauges current: on every checkout, and whenever
    MetricsMiddleware finishes a request (by then its connections are back).
    Always ``engine.pool``: ``engine.dispose()`` replaces the pool object."""
    from sqlalchemy import event

    record_pool(engine.pool)
    event.listen(engine, "checkout", lambda *_args: record_pool(engine.pool))


def forget_pool():
    """Zero this process's pool gauges (its engine was disposed)."""
    metrics = get()
    for gauge in (metrics.pool_size, metrics.pool_checked_out, metrics.pool_overflow):
        gauge.set(0)


class MetricsMiddleware:
    """Count and time every request; answer ``GET /metrics`` for allowed sources."""

    def __init__(self, application, url_map, conf, engine=None):
        self.application = application
        self.adapter = url_map.bind("placement")
        self.sources = [
            ipaddress.ip_network(r.strip(), strict=False)
            for r in conf.metrics.allowed_source_ranges
            if r.strip()
        ]
        self.engine = engine
        if engine is not None:
            instrument_engine(engine)
        get()

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        status = {}

        def _start_response(code, headers, exc_info=None):
            status["code"] = code.split(" ", 1)[0]
            return start_response(code, headers, exc_info)

        def _done():
            self._observe(environ, status.get("code", "500"), time.perf_counter() - started)

        if (
            environ.get("PATH_INFO") == METRICS_PATH
            and environ.get("REQUEST_METHOD") == "GET"
            and self._may_scrape(environ)
        ):
            try:
                body = self._scrape(_start_response)
            finally:
                _done()
            return body
        try:
            body = self.application(environ, _start_response)
        except BaseException:
            _done()
            raise
        return request_log.ClosingIterable(body, _done)

    def _may_scrape(self, environ):
        if any(environ.get(name) for name in PROXY_HEADERS):
            return False
        try:
            addr = ipaddress.ip_address(environ.get("REMOTE_ADDR", ""))
        except ValueError:
            return False
        return any(addr.version == net.version and addr in net for net in self.sources)

    def _scrape(self, start_response):
        if self.engine is not None:
            record_pool(self.engine.pool)
        body, content_type = exposition()
        start_response(
            "200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        )
        return [body]

    def _observe(self, environ, code, seconds):
        method = environ.get("REQUEST_METHOD", "")
        method = method if method in METHODS else "other"
        route = self.route_of(environ.get("PATH_INFO", ""), method)
        metrics = get()
        metrics.requests.labels(route, method, code).inc()
        metrics.latency.labels(route, method).observe(seconds)
        if self.engine is not None:
            record_pool(self.engine.pool)

    def route_of(self, path, method):
        """The route template of ``path`` (bounded label values), whatever the method."""
        if path in OWN_PATHS:
            return path
        for try_method in (method, "GET", "PUT", "POST", "DELETE", "PATCH"):
            try:
                rule, _args = self.adapter.match(path, method=try_method, return_rule=True)
                return rule.rule
            except werkzeug.exceptions.MethodNotAllowed:
                continue
            except werkzeug.exceptions.HTTPException:
                # NotFound, or a redirect for a trailing slash: no route.
                return UNMATCHED
        return UNMATCHED
