"""Operator endpoints through real server processes: placement-api with
several gunicorn workers on PostgreSQL (metrics summed over workers, access
lines, connection budget warning) and the WSGI module under uwsgi."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
import requests

from placement import healthcheck
from tests import processes

BIN = os.path.dirname(sys.executable)
ADMIN = {"x-auth-token": "admin"}
# Seconds of slack for a busy 2-core machine shared with other test runs.
SLACK = 5.0


def _wait_until_up(url, proc, log_path):
    for _ in range(150):
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log_path.read_text()}")
        try:
            return requests.get(url + "/", timeout=5)
        # The socket is bound before a worker answers; on a loaded machine
        # the first request may time out rather than be refused.
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.2)
    raise AssertionError(f"server did not start: {log_path.read_text()}")


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _provider_requests(text, method, status):
    """The requests to /resource_providers by ``method`` answered ``status``
    that the /metrics ``text`` counts."""
    return processes.metric_sum(
        text,
        "placement_api_requests_total",
        route="/resource_providers",
        method=method,
        status=status,
    )


@pytest.mark.slow
def test_placement_api_workers_share_metrics_and_log_each_request(empty_pg_url, tmp_path):
    env = dict(
        os.environ,
        OS_PLACEMENT_DATABASE__CONNECTION=empty_pg_url,
        # 2 x (60 + 60) connections cannot fit PostgreSQL's default 100.
        OS_PLACEMENT_DATABASE__POOL_SIZE="60",
        TMPDIR=str(tmp_path),
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    sync = processes.manage(empty_pg_url, "db", "sync")
    assert sync.returncode == 0, sync.stderr
    log_path = tmp_path / "api.log"
    api = processes.ApiProcess(log_path, ["--workers", "2", "--threads", "2"], env=env)
    url, proc = api.url, api.proc
    try:
        sent = 1  # GET / above
        # Until both workers have served requests (new connection each time,
        # so the kernel spreads them), bounded.
        pids = set()
        while len(pids) < 2 and sent < 400:
            for _ in range(10):
                assert (
                    requests.get(url + "/resource_providers", headers=ADMIN, timeout=30).status_code
                    == 200
                )
                sent += 1
            time.sleep(0.3)  # let the access lines reach the file
            pids = set(re.findall(r" (\d+) INFO placement\.access ", log_path.read_text()))
        assert len(pids) == 2, log_path.read_text()

        text = requests.get(url + "/metrics", timeout=30).text
        # One scrape, answered by one worker, counts what both served.
        assert _provider_requests(text, "GET", "200") == sent - 1
        assert (
            processes.metric_sum(text, "placement_api_requests_total", route="/", status="200") == 1
        )
        # Both workers' pools: 2 x pool_size.
        assert processes.metric_sum(text, "placement_db_pool_size") == 120
        assert (
            processes.metric_sum(
                text, "placement_api_request_duration_seconds_count", route="/resource_providers"
            )
            == sent - 1
        )

        time.sleep(0.3)
        lines = [
            line
            for line in log_path.read_text().splitlines()
            if "placement.access" in line and "/resource_providers" in line
        ]
        assert len(lines) == sent - 1
        for line in lines:
            rid = re.search(r"request_id: (req-[0-9a-f-]{36})$", line).group(1)
            # The line's logging context names the request too (whatever
            # else the log format puts in the brackets).
            assert re.search(rf"\[[^\]]*{rid}[^\]]*\]", line), line
            assert re.search(r"status: 200 len: \d+ microversion: 1\.0 time: [0-9.]+ms", line)
        log_text = log_path.read_text()
        assert (
            "connection budget exceeded: 2 worker(s) x (pool_size 60 + max_overflow 60) "
            "= 240 connections" in log_text
        )
        # gunicorn's own access lines are off (ours replace them).
        assert not re.search(r'"GET /resource_providers HTTP/1\.1" 200', log_text)
    finally:
        api.stop()
    assert proc.returncode == 0, log_path.read_text()
    # The private metrics directory went away with the server.
    assert not list(tmp_path.glob("placement-metrics-*"))


def _health(url):
    started = time.monotonic()
    resp = requests.get(url + "/healthcheck", timeout=30)
    return resp.status_code, resp.text, time.monotonic() - started


@pytest.mark.slow
def test_healthcheck_follows_the_database(private_pg, tmp_path):
    """A database that is stopped or paused shows as 503 within seconds,
    and as healthy again once it is back, without restarting the API."""
    sync = processes.manage(private_pg.url, "db", "sync")
    assert sync.returncode == 0, sync.stderr
    log_path = tmp_path / "api.log"
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=private_pg.url)
    api = processes.ApiProcess(log_path, ["--workers", "1"], env=env)
    url = api.url
    try:
        assert _health(url)[:2] == (200, "database available")
        private_pg.stop("immediate")
        status, text, seconds = _health(url)
        assert (status, text) == (503, "database unavailable"), log_path.read_text()
        assert seconds < SLACK  # refused at once
        private_pg.start()
        _healthy_again(url, log_path)
        # A frozen server accepts the connection and never answers: the
        # check's own time limit turns that into 503, not a hang.
        private_pg.pause()
        try:
            status, text, seconds = _health(url)
        finally:
            private_pg.resume()
        assert (status, text) == (503, "database unavailable"), log_path.read_text()
        assert seconds < healthcheck.CHECK_TIMEOUT + SLACK
        _healthy_again(url, log_path)
    finally:
        api.stop()


def _healthy_again(url, log_path):
    """200 within a few seconds of the database being back, no restart."""
    deadline = time.monotonic() + SLACK
    while True:
        status, text, _seconds = _health(url)
        if (status, text) == (200, "database available"):
            return
        assert time.monotonic() < deadline, (status, text, log_path.read_text())
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("uwsgi", path=BIN) is None,
    reason="uwsgi is not installed (pip install -e '.[test]' builds it)",
)
def test_wsgi_module_under_uwsgi(tmp_path):
    """uwsgi --http :PORT --module placement.wsgi.api:application, configured by
    the environment, answers the API, /healthcheck and /metrics."""
    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    (conf_dir / "placement.conf").write_text(
        f"[placement_database]\nconnection = sqlite:///{tmp_path}/from-file.sqlite\n"
        "[healthcheck]\ndetailed = True\n"
    )
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = dict(
        os.environ,
        OS_PLACEMENT_CONFIG_DIR=str(conf_dir),
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        OS_PLACEMENT_DATABASE__CONNECTION=f"sqlite:///{tmp_path}/uwsgi.sqlite",
    )
    log_path = tmp_path / "uwsgi.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                os.path.join(BIN, "uwsgi"),
                "--http",
                f"127.0.0.1:{port}",
                "--module",
                "placement.wsgi.api:application",
                "--processes",
                "2",
                "--master",
                "--need-app",
                "--die-on-term",
                "--disable-logging",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        root = _wait_until_up(url, proc, log_path)
        assert root.status_code == 200
        assert root.json()["versions"][0]["max_version"] == "1.39"
        assert root.headers["x-openstack-request-id"].startswith("req-")
        rp = str(uuid.uuid4())
        resp = requests.post(
            url + "/resource_providers",
            headers=ADMIN,
            json={"name": "under-uwsgi", "uuid": rp},
            timeout=30,
        )
        assert resp.status_code == 201, resp.text
        resp = requests.get(url + f"/resource_providers/{rp}", headers=ADMIN, timeout=30)
        assert resp.json()["name"] == "under-uwsgi"
        # The environment overrides the config file...
        assert (tmp_path / "uwsgi.sqlite").exists()
        assert not (tmp_path / "from-file.sqlite").exists()
        # ...whose other settings hold: a detailed health check.
        health = requests.get(
            url + "/healthcheck", headers={"Accept": "application/json"}, timeout=30
        )
        assert health.status_code == 200
        assert health.json()["detailed"] is True
        assert health.json()["reasons"][0]["reason"] == "database available"
        text = requests.get(url + "/metrics", timeout=30).text
        assert _provider_requests(text, "POST", "201") == 1
        log_text = log_path.read_text()
        assert "placement.access" in log_text and "request_id: req-" in log_text
    finally:
        _stop(proc)
