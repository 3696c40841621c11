"""Processes the functional tests start and talk to: placement-api with its
console script on a free port (stopped by its PID), placement-manage, a
plain HTTP call to placement as an admin, and what they read back from a
service's /metrics."""

import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

from benchmarks import slow_clients

BIN = os.path.dirname(sys.executable)


class PlacementApi:
    """placement-api started with its console script on a free port; stopped by PID."""

    def __init__(self, tmp_path, db_url, conf_lines=(), args=(), env=None):
        self.port = slow_clients.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = tmp_path / f"api-{self.port}.conf"
        conf.write_text(
            "\n".join(
                [
                    "[placement_database]",
                    f"connection = {db_url}",
                    "sync_on_startup = true",
                    *conf_lines,
                ]
            )
            + "\n"
        )
        self.log = tmp_path / f"api-{self.port}.log"
        full_env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), **(env or {}))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    os.path.join(BIN, "placement-api"),
                    "--config-file",
                    str(conf),
                    "--port",
                    str(self.port),
                    *args,
                ],
                env=full_env,
                stdout=log,
                stderr=log,
            )
        try:
            slow_clients.wait_ready(self.port, self.proc, seconds=90)
        except Exception:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self):
        return self.log.read_text(errors="replace")

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.settimeout(10)
        return sock


def metric_sum(text, name, **labels):
    """The sum of the Prometheus samples ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if not match:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


def api_request(method, url, body=None, version="latest"):
    """One call to placement as the noauth2 admin; (status, decoded body).

    urllib, not a client library: concurrent tests see exactly what the
    server answered, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={
            "x-auth-token": "admin",
            "openstack-api-version": f"placement {version}",
            "content-type": "application/json",
            "accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def manage(db_url, *args, timeout=300):
    """``placement-manage ARGS`` against ``db_url``; the CompletedProcess."""
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
    return subprocess.run(
        [os.path.join(BIN, "placement-manage"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
