"""Processes the functional tests start and talk to: placement-api with its
console script on a free port (stopped by its PID; ApiProcess however it
is configured, PlacementApi configured by a file), placement-manage,
scheduler workers as ``python -m scheduler.batch`` processes, a plain HTTP
call to placement as an admin, what they read back from a service's
/metrics, and the services started with their console scripts (Services:
any number, stopped by PID; ready once they say they serve their topic)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import requests

from benchmarks import slow_clients

BIN = os.path.dirname(sys.executable)

# A port that was free a moment ago: nothing listens on it once the socket
# is closed, until something binds it.
free_port = slow_clients.free_port


class ApiProcess:
    """placement-api started as a process on ``port`` (a free one if not
    given) with ``args``, its output in the file ``log``; it has started once
    GET / answers 200 (within ``seconds``, else AssertionError with its
    output). ``command`` instead of the console script (``python -m ...``);
    with ``session`` it leads a process group of its own, and stop() signals
    the group (gunicorn's workers too)."""

    def __init__(self, log, args=(), env=None, port=None, command=None, session=False, seconds=60):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._session = session
        command = list(command or [os.path.join(BIN, "placement-api")])
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [*command, "--port", str(self.port), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=session,
            )
        try:
            self._wait(seconds)
        except BaseException:
            self.stop()
            raise

    def _wait(self, seconds):
        deadline = time.monotonic() + seconds
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"placement-api exited {self.proc.returncode}:\n{self.output()}"
                )
            try:
                if requests.get(self.url + "/", timeout=5).status_code == 200:
                    return
            # The socket is bound before a worker answers; on a loaded
            # machine the first request may time out rather than be refused.
            except (requests.ConnectionError, requests.Timeout):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"placement-api did not start:\n{self.output()}")
            time.sleep(0.2)

    def _signal(self, sig):
        if self._session:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    def stop(self):
        """SIGTERM, SIGKILL after 30 s; its exit status is ``proc.returncode``."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()

    def output(self):
        return self.log.read_text(errors="replace")


class PlacementApi(ApiProcess):
    """placement-api on a free port, configured by a file: the database
    ``db_url`` (synced at start-up) and ``conf_lines``."""

    def __init__(self, tmp_path, db_url, conf_lines=(), args=(), env=None):
        port = free_port()
        conf = tmp_path / f"api-{port}.conf"
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
        full_env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), **(env or {}))
        super().__init__(
            tmp_path / f"api-{port}.log",
            ["--config-file", str(conf), *args],
            env=full_env,
            port=port,
            seconds=90,
        )

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


def manage(db_url, *args, timeout=300, env=None):
    """``placement-manage ARGS`` against ``db_url`` in ``env`` (os.environ
    unless given); the CompletedProcess."""
    env = dict(os.environ if env is None else env, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
    return subprocess.run(
        [os.path.join(BIN, "placement-manage"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def run_batches(tmp_path, url, batches, **env):
    """One ``python -m scheduler.batch`` process per list of request specs in
    ``batches``, all at once, against placement at ``url`` (scheduling
    reports off, ``env`` added: ``OS_SCHEDULER__MAX_ATTEMPTS="1"``, ...).
    Each must exit 0 (else AssertionError with its stderr's tail); their
    summaries (the last line of stderr), in the order of ``batches``."""
    env = dict(
        os.environ,
        OS_PLACEMENT__ENDPOINT_OVERRIDE=url,
        OS_FILTER_SCHEDULER__WRITE_REPORTS="false",
        **env,
    )
    procs = []
    for w, specs in enumerate(batches):
        path = tmp_path / f"specs-{w}.jsonl"
        path.write_text("".join(json.dumps(spec) + "\n" for spec in specs))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "scheduler.batch",
                    "--requests",
                    str(path),
                    "--output",
                    str(tmp_path / f"out-{w}.jsonl"),
                ],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    summaries = []
    for p in procs:
        _out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        summaries.append(json.loads(err.strip().splitlines()[-1]))
    return summaries


class Services:
    """Console-script processes of one test (``start(name, script, *args)``,
    its output in ``<name>.log``), stopped by PID at the end."""

    def __init__(self, tmp_path, env):
        self.tmp_path = tmp_path
        self.env = env
        self.procs = []

    def start(self, name, *args):
        log = open(self.tmp_path / f"{name}.log", "ab")
        proc = subprocess.Popen(
            [os.path.join(BIN, args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        proc.name = name
        self.procs.append(proc)
        return proc

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def until(what, check, timeout, every=0.2):
    """``check()``'s first true value, asked every ``every`` seconds;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def wait_http(url, proc, timeout=90):
    """Until ``url`` answers 200 (``proc`` serves it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.name} exited {proc.returncode}")
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer")


def wait_ready(tmp_path, proc, timeout=120):
    """Until the service says it serves its topic (its queue is declared)."""
    log = tmp_path / f"{proc.name}.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if " serving topic " in text:
            return
        assert proc.poll() is None, (proc.name, text[-3000:])
        time.sleep(0.2)
    raise AssertionError(f"{proc.name} not ready: {log.read_text()[-2000:]}")


def running_instances(state_dir):
    """{instance: host} of the simulated hypervisors' state directory."""
    out = {}
    for name in os.listdir(state_dir):
        if name.endswith(".tmp"):
            continue
        with open(os.path.join(state_dir, name), encoding="utf-8") as f:
            out[name] = f.read().strip()
    return out
