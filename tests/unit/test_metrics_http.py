"""joule.metrics_http.start: the metrics endpoint of power-controller and
node-agent (port 0: none; a taken port: one ConfigError line)."""

import socket
import urllib.request

import prometheus_client
import pytest

from joule import config
from joule import metrics_http


def test_a_taken_port_is_one_config_error_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(config.ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}: "):
            metrics_http.start("127.0.0.1", port, prometheus_client.CollectorRegistry())


def test_port_0_serves_nothing_and_a_free_port_serves_the_registry():
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Gauge("joule_test_gauge", "A gauge of this test.", registry=registry).set(3)
    assert metrics_http.start("127.0.0.1", 0, registry) is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics_http.start("127.0.0.1", port, registry)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "joule_test_gauge 3.0" in body
