"""Fault campaign: a real placement-api on a private PostgreSQL that is
restarted (fast and immediate modes) and paused (SIGSTOP of the postmaster
and its backends) under a light concurrent load of claims and releases on
contended providers.

What must hold (issue 13's acceptance): no acknowledged write is lost (every
2xx PUT/DELETE is what a later read shows, unless a later write of the same
consumer, acknowledged or not, replaced it); usage never exceeds capacity;
every error is a 503 JSON body with Retry-After and
placement.database.unavailable (409 is a legitimate answer to a claim that
does not fit); every request is answered within its time limit; and the
service recovers within 5 s of the database coming back, without a restart.
The database server is this test's own (tests/private_postgres.py), never
the shared one.
"""

import os
import random
import sys
import threading
import time
import uuid

import pytest
import requests

from tests import processes

BIN = os.path.dirname(sys.executable)
PROJECT = "7d1c9d6a-0c43-4e0a-8a8a-3d5c7e1f0a01"
USER = "2b8e1f9c-5d6a-4b7e-9c0d-1e2f3a4b5c02"
VERSION = "1.27"  # dict allocations with project/user, no consumer generations
CAPACITY = 8  # VCPU per provider

# Short limits, so that the test is short.
LIMITS = {
    "connect_timeout": 2,
    "pool_timeout": 1,
    "statement_timeout": 2,
    "lock_timeout": 1,
    "idle_in_transaction_timeout": 3,
}
# The longest a request may wait on the database (docs/architecture.md,
# "Database faults"): a pool wait, a failed check and a reconnect, then one
# statement to a server that does not answer (statement_timeout + 2 s).
TIME_LIMIT = (
    LIMITS["pool_timeout"] + 2 * LIMITS["connect_timeout"] + LIMITS["statement_timeout"] + 2
)
SLACK = 3.0  # a busy 2-core machine
RECOVERY = 5.0
# Longer than any request may wait: a request held for the whole pause fails.
PAUSE = TIME_LIMIT + SLACK + 1


def _env(pg):
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=pg.url)
    for name, value in LIMITS.items():
        env[f"OS_PLACEMENT_DATABASE__{name.upper()}"] = str(value)
    return env


@pytest.fixture
def api(private_pg, tmp_path):
    env = _env(private_pg)
    sync = processes.manage(private_pg.url, "db", "sync")
    assert sync.returncode == 0, sync.stderr
    api = processes.ApiProcess(tmp_path / "api.log", ["--workers", "2"], env=env, session=True)
    yield api.url, api.proc, api.log
    api.stop()


def _session():
    s = requests.Session()
    s.headers.update(
        {
            "x-auth-token": "admin",
            "accept": "application/json",
            "openstack-api-version": f"placement {VERSION}",
        }
    )
    return s


class Ledger:
    """What the clients were told, per consumer: the last acknowledged state
    and the states of writes since then whose outcome is unknown (a 503 or a
    lost answer may or may not have committed)."""

    def __init__(self):
        self.acked = {}  # consumer -> {rp: vcpu} ({} for none)
        self.pending = {}  # consumer -> [possible states]
        self.violations = []

    def possible(self, consumer):
        return [self.acked.get(consumer, {})] + self.pending.get(consumer, [])

    def ack(self, consumer, state):
        self.acked[consumer] = state
        self.pending[consumer] = []

    def unknown(self, consumer, state):
        self.pending.setdefault(consumer, []).append(state)

    def observe(self, consumer, state, when):
        if state not in self.possible(consumer):
            self.violations.append(
                f"{when}: consumer {consumer} holds {state}, acknowledged "
                f"{self.acked.get(consumer, {})}, unacknowledged {self.pending.get(consumer)}"
            )
        self.ack(consumer, state)


class Load:
    def __init__(self, url, providers, clients=6, consumers_each=4):
        self.url = url
        self.providers = providers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ledger = Ledger()
        self.results = []  # (start, end, method, status or exception text, problem or None)
        self.usage_samples = []
        self.threads = [
            threading.Thread(
                target=self._client,
                args=([str(uuid.uuid4()) for _ in range(consumers_each)], random.Random(i)),
                daemon=True,
            )
            for i in range(clients)
        ]
        self.threads.append(threading.Thread(target=self._monitor, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=TIME_LIMIT + SLACK + 10)

    def _call(self, session, method, path, **kw):
        start = time.monotonic()
        try:
            resp = session.request(method, self.url + path, timeout=TIME_LIMIT + SLACK + 5, **kw)
        except requests.RequestException as exc:
            end = time.monotonic()
            with self.lock:
                self.results.append(
                    (start, end, method, type(exc).__name__, f"{method} {path}: no answer: {exc}")
                )
            return None
        end = time.monotonic()
        problem = None
        if resp.status_code == 503:
            problem = _bad_503(resp)
        elif resp.status_code >= 500 or resp.status_code in (400, 401, 403):
            problem = f"{resp.status_code} {resp.text[:300]}"
        with self.lock:
            self.results.append(
                (start, end, method, resp.status_code, problem and f"{method} {path}: {problem}")
            )
        return resp

    def _read(self, session, consumer):
        resp = self._call(session, "GET", f"/allocations/{consumer}")
        if resp is None or resp.status_code != 200:
            return None
        return {rp: a["resources"]["VCPU"] for rp, a in resp.json()["allocations"].items()}

    def _client(self, consumers, rnd):
        session = _session()
        ledger = self.ledger
        while not self.stop.is_set():
            consumer = rnd.choice(consumers)
            with self.lock:
                uncertain = bool(ledger.pending.get(consumer))
                current = ledger.acked.get(consumer, {})
            if uncertain:
                state = self._read(session, consumer)
                if state is not None:
                    with self.lock:
                        ledger.observe(consumer, state, "read after an unknown outcome")
            elif current and rnd.random() < 0.5:
                resp = self._call(session, "DELETE", f"/allocations/{consumer}")
                with self.lock:
                    if resp is not None and resp.status_code == 204:
                        ledger.ack(consumer, {})
                    elif resp is not None and resp.status_code == 404:
                        ledger.observe(consumer, {}, "DELETE answered 404")
                    else:
                        ledger.unknown(consumer, {})
            else:
                target = {rnd.choice(self.providers): rnd.randint(1, 3)}
                body = {
                    "allocations": {rp: {"resources": {"VCPU": n}} for rp, n in target.items()},
                    "project_id": PROJECT,
                    "user_id": USER,
                }
                resp = self._call(session, "PUT", f"/allocations/{consumer}", json=body)
                with self.lock:
                    if resp is not None and resp.status_code == 204:
                        ledger.ack(consumer, target)
                    elif resp is None or resp.status_code == 503:
                        ledger.unknown(consumer, target)
                    # 409 (does not fit, or lost every retry): nothing written.
            time.sleep(rnd.uniform(0.01, 0.04))

    def _monitor(self):
        session = _session()
        while not self.stop.is_set():
            for rp in self.providers:
                try:
                    resp = session.get(
                        f"{self.url}/resource_providers/{rp}/usages", timeout=TIME_LIMIT + SLACK + 5
                    )
                except requests.RequestException:
                    continue
                if resp.status_code == 200:
                    with self.lock:
                        self.usage_samples.append((rp, resp.json()["usages"].get("VCPU", 0)))
            time.sleep(0.2)


def _bad_503(resp):
    """What is wrong with a 503 answer, or None."""
    if "Retry-After" not in resp.headers:
        return "503 without Retry-After"
    try:
        (error,) = resp.json()["errors"]
    except (ValueError, KeyError, TypeError):
        return f"503 without a JSON error body: {resp.text[:200]}"
    if error.get("code") != "placement.database.unavailable":
        return f"503 with code {error.get('code')}"
    return None


def _wait_recovered(url, providers, since):
    """Seconds from ``since`` until a read and a write both succeed."""
    session = _session()
    probe = str(uuid.uuid4())
    body = {
        "allocations": {providers[0]: {"resources": {"VCPU": 1}}},
        "project_id": PROJECT,
        "user_id": USER,
    }
    read_ok = write_ok = False
    deadline = since + 30
    while time.monotonic() < deadline:
        try:
            if not read_ok:
                read_ok = (
                    session.get(
                        f"{url}/resource_providers/{providers[0]}/usages",
                        timeout=TIME_LIMIT + SLACK,
                    ).status_code
                    == 200
                )
            if read_ok and not write_ok:
                put = session.put(
                    f"{url}/allocations/{probe}", json=body, timeout=TIME_LIMIT + SLACK
                )
                if put.status_code == 204:
                    write_ok = (
                        session.delete(
                            f"{url}/allocations/{probe}", timeout=TIME_LIMIT + SLACK
                        ).status_code
                        == 204
                    )
                elif put.status_code == 409:  # full: reading and writing all the same
                    write_ok = True
            if read_ok and write_ok:
                return time.monotonic() - since
        except requests.RequestException:
            pass
        time.sleep(0.1)
    return float("inf")


@pytest.mark.slow
def test_restarts_and_pause_under_load(private_pg, api):
    url, proc, log_path = api
    admin = _session()
    providers = []
    for i in range(3):
        rp = str(uuid.uuid4())
        assert (
            admin.post(
                f"{url}/resource_providers", json={"name": f"contended-{i}", "uuid": rp}
            ).status_code
            == 200
        )
        resp = admin.put(
            f"{url}/resource_providers/{rp}/inventories",
            json={
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": CAPACITY, "max_unit": CAPACITY}},
            },
        )
        assert resp.status_code == 200, resp.text
        providers.append(rp)

    load = Load(url, providers)
    windows = {}
    recovery = {}
    load.start()
    try:
        time.sleep(2)
        for name, fault in (
            ("fast restart", lambda: private_pg.restart("fast")),
            ("immediate restart", lambda: private_pg.restart("immediate")),
            ("pause", lambda: (private_pg.pause(), time.sleep(PAUSE), private_pg.resume())),
        ):
            start = time.monotonic()
            fault()
            back = time.monotonic()
            windows[name] = (start, back)
            recovery[name] = _wait_recovered(url, providers, back)
            time.sleep(2)
    finally:
        private_pg.resume()
        load.finish()

    # The service was never restarted.
    assert proc.poll() is None

    problems = [r[4] for r in load.results if r[4]]
    assert problems == [], problems[:10]
    slow = [
        (method, status, round(end - start, 1))
        for start, end, method, status, _p in load.results
        if end - start > TIME_LIMIT + SLACK
    ]
    assert slow == [], f"answered later than {TIME_LIMIT} s (+{SLACK} s slack): {slow[:10]}"
    assert all(seconds <= RECOVERY for seconds in recovery.values()), recovery

    # The faults were felt: the pause ran the limits out (503s), writes went on around it.
    pause_start, pause_end = windows["pause"]
    during_pause = [r for r in load.results if pause_start <= r[0] <= pause_end]
    assert any(r[3] == 503 for r in during_pause), f"no 503 during a {PAUSE} s pause"
    acked_writes = [r for r in load.results if r[2] in ("PUT", "DELETE") and r[3] == 204]
    assert len(acked_writes) >= 50, len(acked_writes)

    # No acknowledged write lost, nothing written that no client asked for.
    session = _session()
    final = {}
    for consumer in list(load.ledger.acked) + list(load.ledger.pending):
        if consumer in final:
            continue
        resp = session.get(f"{url}/allocations/{consumer}", timeout=10)
        assert resp.status_code == 200, resp.text
        state = {rp: a["resources"]["VCPU"] for rp, a in resp.json()["allocations"].items()}
        load.ledger.observe(consumer, state, "final read")
        final[consumer] = state
    assert load.ledger.violations == []

    # Usage: never above capacity while it ran, and exactly what the consumers hold.
    assert load.usage_samples, "the usage monitor read nothing"
    assert max(used for _rp, used in load.usage_samples) <= CAPACITY
    for rp in providers:
        used = (
            session.get(f"{url}/resource_providers/{rp}/usages", timeout=10)
            .json()["usages"]
            .get("VCPU", 0)
        )
        assert used == sum(state.get(rp, 0) for state in final.values())
        assert used <= CAPACITY

    log = log_path.read_text()
    assert "Traceback" not in log and "Uncaught exception" not in log, log[-3000:]
    assert "database unavailable" in log

    latencies = sorted(end - start for start, end, *_rest in load.results)
    statuses = {}
    for r in load.results:
        statuses[r[3]] = statuses.get(r[3], 0) + 1
    print(
        f"\nrequests {len(load.results)} {statuses}; max latency {latencies[-1]:.2f} s; "
        f"recovery { ({k: round(v, 2) for k, v in recovery.items()}) }"
    )
