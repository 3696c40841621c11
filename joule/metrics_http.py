"""Prometheus metrics over HTTP for the long-running services ([metrics]).

The scheduler workers and conductors serve ``GET /metrics`` on
``[metrics] port`` (0: not served). Each process serves its own; run several
on one machine with different ports (or let Prometheus discover them).
"""

import prometheus_client
from oslo_config import cfg

from joule import config

# Which service a scraped process is (a dashboard joins the others on it).
SERVICE = prometheus_client.Gauge(
    "joule_service_up", "1 while this process serves its topic.", ["service", "topic"]
)

metrics_group = cfg.OptGroup("metrics", title="Prometheus metrics")

metrics_opts = [
    cfg.PortOpt(
        "port",
        default=0,
        help="Port of the Prometheus metrics endpoint (GET /metrics); 0 does not serve metrics.",
    ),
    cfg.HostAddressOpt(
        "host", default="127.0.0.1", help="Address the metrics endpoint listens on."
    ),
]


def register_opts(conf):
    conf.register_group(cfg.OptGroup(metrics_group.name, title=metrics_group.title))
    conf.register_opts(metrics_opts, group=metrics_group.name)


def list_opts():
    return [(metrics_group, metrics_opts)]


def start(host, port, registry=prometheus_client.REGISTRY):
    """Serve ``registry`` on ``host:port`` in a daemon thread (port 0: not
    served); a port that cannot be bound is the one ConfigError line every
    console script prints for it.

    :raise joule.config.ConfigError: the port cannot be bound.
    """
    if not port:
        return
    try:
        prometheus_client.start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise config.ConfigError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
        ) from None


def serve(conf):
    """Start serving in a daemon thread; return the port (None when disabled).

    :raise OSError: the port cannot be bound.
    """
    if not conf.metrics.port:
        return None
    prometheus_client.start_http_server(conf.metrics.port, addr=conf.metrics.host)
    return conf.metrics.port
