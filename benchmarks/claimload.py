"""Claim/release load against any Placement-compatible API, plus a usage sampler.

Shared by ``tests/functional/db/test_allocation_stress.py`` (modest size, in the
suite) and ``benchmarks/claims.py`` (ours vs upstream). Speaks only the public
REST API (microversion 1.28, ``consumer_generation: null`` for new consumers)
so it runs unchanged against upstream OpenStack Placement; the sampler reads
the database directly (both use the same table names) so that sampling never
competes with the clients for API workers.
"""

import collections
import dataclasses
import http.client
import json
import multiprocessing
import os
import random
import threading
import time
import urllib.parse
import uuid as uuid_lib

import sqlalchemy as sa

HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.28",
    "accept": "application/json",
}
PROJECT = "5a2c0f3e-bench-proj"
USER = "5a2c0f3e-bench-user"


@dataclasses.dataclass
class Outcome:
    """Everything the clients saw, merged."""

    claims_ok: int = 0
    claims_refused: int = 0
    releases_ok: int = 0
    bad: list = dataclasses.field(default_factory=list)  # (op, status, body) not 204/409
    held: dict = dataclasses.field(default_factory=dict)  # consumer -> (rp, amount)
    released: set = dataclasses.field(default_factory=set)
    elapsed: float = 0.0

    @property
    def operations(self):
        return self.claims_ok + self.claims_refused + self.releases_ok + len(self.bad)


class _Response:
    """What a client keeps of an answer (a requests-like subset)."""

    def __init__(self, status_code, body):
        self.status_code = status_code
        self.text = body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.text)


class _Http:
    """One keep-alive HTTP/1.1 connection (http.client: far less client CPU per
    request than requests, so the driver does not compete with the server)."""

    def __init__(self, base_url, timeout=120):
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.timeout = timeout
        self.conn = None

    def request(self, method, path, body=None):
        headers = dict(HEADERS)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=payload, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed an idle keep-alive connection before reading
                # this request: nothing was done, send it again once.
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if resp.getheader("connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return _Response(resp.status, data)

    def close(self):
        if self.conn is not None:
            self.conn.close()


def _is_clean_refusal(resp):
    """A 409 in the error format, either "does not fit" or a concurrent update."""
    if resp.status_code != 409:
        return False
    try:
        err = resp.json()["errors"][0]
    except (ValueError, KeyError, IndexError):
        return False
    detail = err.get("detail", "")
    return err.get("status") == 409 and (
        "exceed the capacity" in detail
        or "placement.concurrent_update" == err.get("code")
        or "changed while attempting to allocate" in detail
    )


def _client(
    base_url,
    providers,
    index,
    ops_per_client,
    resource_class,
    release_probability,
    max_held_per_client,
    seed,
    workload_class=None,
):
    """One client's whole run; returns its Outcome (elapsed unset)."""
    rnd = random.Random(seed * 1000 + index)
    http_conn = _Http(base_url)
    held = collections.deque()
    local = Outcome()
    for _ in range(ops_per_client):
        release = held and (len(held) >= max_held_per_client or rnd.random() < release_probability)
        if release:
            consumer, rp_uuid, amount = held.popleft()
            resp = http_conn.request("DELETE", f"/allocations/{consumer}")
            if resp.status_code == 204:
                local.releases_ok += 1
                local.released.add(consumer)
                local.held.pop(consumer, None)
            else:
                local.bad.append(("release", resp.status_code, resp.text[:300]))
            continue
        consumer = str(uuid_lib.uuid4())
        rp_uuid = rnd.choice(providers)
        body = {
            "allocations": {rp_uuid: {"resources": {resource_class: 1}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
        }
        if workload_class is not None:
            # Extension field (ours only): performance claims take the eco check.
            body["workload_class"] = workload_class
        resp = http_conn.request("PUT", f"/allocations/{consumer}", body)
        if resp.status_code == 204:
            local.claims_ok += 1
            held.append((consumer, rp_uuid, 1))
            local.held[consumer] = (rp_uuid, 1)
        elif _is_clean_refusal(resp):
            local.claims_refused += 1
        else:
            local.bad.append(("claim", resp.status_code, resp.text[:300]))
    http_conn.close()
    return local


def _merge(outcome, local):
    outcome.claims_ok += local.claims_ok
    outcome.claims_refused += local.claims_refused
    outcome.releases_ok += local.releases_ok
    outcome.bad.extend(local.bad)
    outcome.held.update(local.held)
    outcome.released |= local.released


def _run_threads(indexes, args, gate):
    """Run the clients ``indexes`` as threads once ``gate()`` returns; merged Outcome."""
    outcome = Outcome()
    lock = threading.Lock()
    barrier = threading.Barrier(len(indexes) + 1)

    def client(index):
        barrier.wait()
        try:
            local = _client(args[0], args[1], index, *args[2:])
        except Exception as exc:  # noqa: BLE001 - reported, never lost
            local = Outcome(bad=[("client", 0, repr(exc)[:300])])
        with lock:
            _merge(outcome, local)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in indexes]
    for t in threads:
        t.start()
    gate()
    barrier.wait()
    began = time.monotonic()
    for t in threads:
        t.join()
    outcome.elapsed = time.monotonic() - began
    return outcome


def _process_main(indexes, args, ready, go, results):
    def gate():
        ready.put(os.getpid())
        go.wait()

    outcome = _run_threads(indexes, args, gate)
    results.put((outcome, time.monotonic()))


def run(
    base_url,
    providers,
    clients,
    ops_per_client,
    resource_class="VCPU",
    release_probability=0.45,
    max_held_per_client=6,
    seed=1,
    processes=1,
    workload_class=None,
):
    """``clients`` concurrent clients, each doing ``ops_per_client`` claims or releases.

    A client claims 1 unit of ``resource_class`` on a random provider for a new
    consumer, or releases one of the consumers it holds (with
    ``release_probability``, always when it holds ``max_held_per_client``).
    With ``processes`` > 1 the clients are spread over that many client
    processes (threads within each), so the driver's own CPU and GIL do not
    limit what is measured; the clock starts when every client is ready.
    ``workload_class`` (ours only) is sent with every claim.
    """
    args = (
        base_url,
        list(providers),
        ops_per_client,
        resource_class,
        release_probability,
        max_held_per_client,
        seed,
        workload_class,
    )
    processes = max(1, min(processes, clients))
    if processes == 1:
        return _run_threads(range(clients), args, lambda: None)
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    groups = [list(range(clients))[i::processes] for i in range(processes)]
    procs = [
        ctx.Process(target=_process_main, args=(group, args, ready, go, results), daemon=True)
        for group in groups
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=120)
    time.sleep(0.05)  # every client thread is at its barrier
    began = time.monotonic()
    go.set()
    outcome = Outcome()
    ended = began
    for _ in procs:
        local, finished = results.get()
        _merge(outcome, local)
        ended = max(ended, finished)
    for proc in procs:
        proc.join(timeout=60)
    outcome.elapsed = ended - began
    return outcome


class UsageSampler(threading.Thread):
    """Reads every provider's usage and capacity, in one statement, until stopped.

    ``worst`` maps provider uuid to the largest ``used - capacity`` seen
    (> 0 means over-committed at that moment); ``samples`` counts reads.
    """

    def __init__(self, db_url, providers, resource_class="VCPU", interval=0.01):
        super().__init__(daemon=True)
        self.engine = sa.create_engine(db_url)
        self.providers = list(providers)
        self.resource_class = resource_class
        self.interval = interval
        self.samples = 0
        self.worst = {}
        self.over_samples = 0
        self._halt = threading.Event()

    # One statement: one snapshot on PostgreSQL, consistent on SQLite.
    SQL = sa.text(
        "SELECT rp.uuid, (i.total - i.reserved) * i.allocation_ratio AS capacity, "
        "(SELECT COALESCE(SUM(a.used), 0) FROM allocations a "
        "  WHERE a.resource_provider_id = rp.id AND a.resource_class_id = i.resource_class_id) "
        "  AS used "
        "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
        "JOIN resource_classes rc ON rc.id = i.resource_class_id "
        "WHERE rc.name = :rc"
    )

    def read(self):
        with self.engine.connect() as conn:
            rows = conn.execute(self.SQL, {"rc": self.resource_class}).all()
        return {r.uuid: (float(r.capacity), int(r.used)) for r in rows if r.uuid in self.providers}

    def run(self):
        while not self._halt.is_set():
            over = False
            for rp_uuid, (capacity, used) in self.read().items():
                excess = used - capacity
                self.worst[rp_uuid] = max(self.worst.get(rp_uuid, excess), excess)
                over = over or excess > 0
            self.samples += 1
            self.over_samples += int(over)
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(timeout=30)
        self.engine.dispose()

    @property
    def max_excess(self):
        return max(self.worst.values()) if self.worst else 0


def stored_allocations(db_url, resource_class="VCPU"):
    """{consumer_uuid: [(rp_uuid, used), ...]} as stored, for the end-of-run audit."""
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT a.consumer_id, rp.uuid, a.used FROM allocations a "
                    "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
                    "JOIN resource_classes rc ON rc.id = a.resource_class_id WHERE rc.name = :rc"
                ),
                {"rc": resource_class},
            ).all()
    finally:
        engine.dispose()
    found = collections.defaultdict(list)
    for consumer, rp_uuid, used in rows:
        found[consumer].append((rp_uuid, int(used)))
    return dict(found)
