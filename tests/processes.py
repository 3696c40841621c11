"""Processes the functional tests start: placement-api with its console
script on a free port (stopped by its PID), and what they read back from a
service's /metrics."""

import os
import re
import socket
import subprocess
import sys

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
