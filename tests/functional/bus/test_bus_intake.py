"""A conductor takes off RabbitMQ only what it can work on (issue 23, finding 4).

A super conductor holds at most ``rabbit_qos_prefetch_count`` messages it
has not finished (by default its executor threads), and acknowledges each
once its endpoint returned, its requests recorded under its lease: the
rest stay on the queue. So

- killed (SIGKILL) with 40 requests queued and no scheduler to answer, it
  loses none: those it recorded are taken over by a live conductor's sweep
  after their lease (their redelivered messages are dropped as already
  recorded), the others are still on the queue for the next conductor;
  every instance is placed once and holds exactly its allocation;
- given SIGTERM with a backlog, it exits within ``[rpc] stop_timeout``
  (below the unit's TimeoutStopSec) although what it holds cannot finish,
  and leaves every message it did not finish on the queue.

The services are processes started with their console scripts, on the real
RabbitMQ (a virtual host of the test's own) and placement on both databases.
"""

import json
import os
import signal
import subprocess
import sys
import time

from tests import bus
from tests import processes

BIN = os.path.dirname(sys.executable)
QUEUED = 40
# The super conductor's derived executor threads (conductor.conf.
# super_executor_threads at the shipped defaults): its prefetch.
PREFETCH = 8
STOP_TIMEOUT = 4  # [rpc] stop_timeout of these tests, seconds


def _write_conf(path, vhost, placement_url, state_dir, extra=()):
    # Shipped defaults but for the times: a scheduler call unanswered for
    # 3 s is tried again 20 times (what a super conductor holds without a
    # scheduler never finishes in the test), leases of 3 s swept every 0.5 s.
    path.write_text(
        "\n".join(
            [
                "[DEFAULT]",
                f"transport_url = rabbit://guest:guest@127.0.0.1:5672/{vhost}",
                "[placement_client]",
                f"endpoint = {placement_url}",
                "[conductor]",
                f"simulated_state_dir = {state_dir}",
                "lease_seconds = 3",
                "sweep_interval = 0.5",
                "[rpc]",
                "call_timeout = 3",
                "call_retries = 20",
                f"stop_timeout = {STOP_TIMEOUT}",
                *extra,
            ]
        )
        + "\n"
    )


def _queue(vhost, name="conductor"):
    """(ready, unacknowledged) messages of queue ``name``."""
    for _attempt in range(5):
        found = _listed(vhost, name)
        if found is not None:
            return found
        time.sleep(0.5)  # a listing can leave a busy queue out
    raise AssertionError(f"no queue {name} in vhost {vhost}")


def _listed(vhost, name):
    out = subprocess.run(
        [
            "rabbitmqctl",
            "list_queues",
            "-q",
            "-p",
            vhost,
            "name",
            "messages_ready",
            "messages_unacknowledged",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == name:
            return int(fields[1]), int(fields[2])
    return None


def _records(db):
    return bus.ledger(db)[1]


def _wait(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


class _Run:
    """placement-api, a cell conductor, build-submit casting ``requests``
    one a message (never sent again: what a conductor loses stays lost),
    and the services the test starts."""

    def __init__(self, db_url, vhost, tmp_path, requests, extra=()):
        self.tmp_path = tmp_path
        self.env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
        self.procs = processes.Services(tmp_path, self.env)
        self.state_dir = tmp_path / "hypervisors"
        self.state_dir.mkdir()
        self.requests = requests
        self.extra = extra
        self.submit = None

    def start_base(self, vhost):
        port = processes.free_port()
        api = self.procs.start("placement-api", "placement-api", "--port", str(port))
        url = f"http://127.0.0.1:{port}"
        processes.wait_http(url + "/", api)
        conf = self.tmp_path / "services.conf"
        _write_conf(conf, vhost, url, self.state_dir, self.extra)
        self.cf = ["--config-file", str(conf)]
        self.service("cell1", "conductor-worker", "--cell", "cell1")

    def backlog(self, db, vhost, name):
        """A super conductor ``name`` with every request queued to it and no
        scheduler: (its process, the queue's (ready, unacked) once it took
        what it takes and recorded it)."""
        self.start_base(vhost)
        proc = self.service(name, "conductor-worker")
        self.submit_all()
        _wait("no request recorded", lambda: len(_records(db)) >= PREFETCH, 30)
        time.sleep(1.0)  # it would take more now, if it took more
        return proc, _queue(vhost)

    def service(self, name, script, *args):
        proc = self.procs.start(name, script, *self.cf, *args)
        processes.wait_ready(self.tmp_path, proc)
        return proc

    def submit_all(self):
        specs = self.tmp_path / "specs.jsonl"
        specs.write_text("\n".join(bus.spec_lines(self.requests)) + "\n")
        self.out = self.tmp_path / "submit.out"
        self.submit = subprocess.Popen(
            [
                os.path.join(BIN, "build-submit"),
                *self.cf,
                "--requests",
                str(specs),
                "--requests-per-message",
                "1",
                "--json",
                "--timeout",
                "60",
                "--resend-after",
                "3600",
            ],
            stdout=open(self.out, "w"),
            stderr=open(self.tmp_path / "submit.err", "w"),
            env=self.env,
        )

    def stop(self):
        if self.submit is not None and self.submit.poll() is None:
            self.submit.kill()
            self.submit.wait()
        self.procs.stop_all()

    def finish(self, db):
        """build-submit's summary once it exited; every invariant checked."""
        rc = self.submit.wait(timeout=120)
        lines = [json.loads(x) for x in self.out.read_text().splitlines() if x.strip()]
        summary = lines[-1]
        assert rc == 0, (summary, (self.tmp_path / "submit.err").read_text()[-3000:])
        outcomes = [x for x in lines[:-1] if x.get("status") in ("placed", "failed")]
        assert summary["placed"] == self.requests, summary
        assert summary["refused"] == 0 and summary["unanswered"] == 0, summary
        running = processes.running_instances(self.state_dir)
        counts = bus.check_invariants(db, outcomes, running)
        # Each placed once: one record each, one allocation, one hypervisor.
        assert counts == {"placed": self.requests, "failed": 0}, counts
        assert len(running) == self.requests
        return summary


def test_a_killed_super_conductor_loses_none_of_the_queued_requests(db, db_url, vhost, tmp_path):
    bus.load_cluster(db, nodes=4, cores=64, cells=1)
    run = _Run(db_url, vhost, tmp_path, QUEUED)
    try:
        # No scheduler: the conductor records what it took and waits.
        victim, before = run.backlog(db, vhost, "super-killed")
        taken = len(_records(db))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        time.sleep(0.5)
        after = _queue(vhost)
        run.service("scheduler", "scheduler-worker")
        run.service("super", "conductor-worker")
        # None lost, none doubled ...
        run.finish(db)
        assert len(_records(db)) == QUEUED
        # ... because it had taken only what its threads work on, and what
        # it had not finished went back on the queue when it died.
        assert (before, after) == ((QUEUED - PREFETCH, PREFETCH), (QUEUED, 0)), (
            f"{taken} recorded; queue (ready, unacked) before the kill {before}, after {after}"
        )
    finally:
        run.stop()


def test_sigterm_leaves_the_backlog_on_the_queue_and_exits_in_time(db, db_url, vhost, tmp_path):
    """The operator's prefetch (12) is above the threads (8): 4 messages
    wait in the conductor for a thread, and go back to the queue the moment
    it is told to stop, while the 8 in hand are still being worked on."""
    bus.load_cluster(db, nodes=4, cores=64, cells=1)
    requests, prefetch = 20, 12
    extra = ["[oslo_messaging_rabbit]", f"rabbit_qos_prefetch_count = {prefetch}"]
    run = _Run(db_url, vhost, tmp_path, requests, extra)
    try:
        stopped, before = run.backlog(db, vhost, "super-stopped")
        start = time.monotonic()
        stopped.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        stopping = _queue(vhost)
        try:
            rc = stopped.wait(timeout=STOP_TIMEOUT + 20)
        except subprocess.TimeoutExpired:
            rc = None
        seconds = time.monotonic() - start
        # It held only its prefetch; told to stop, it gave back at once
        # what it had not started; what it had in hand cannot finish (no
        # scheduler): it leaves it, in time; every message it did not finish
        # is on the queue, the untaken ones and those whose requests it
        # recorded (taken over after the lease).
        assert (before, stopping, rc, seconds < STOP_TIMEOUT + 5, _queue(vhost)) == (
            (requests - prefetch, prefetch),
            (requests - PREFETCH, PREFETCH),
            0,
            True,
            (requests, 0),
        ), f"exit {rc} after {seconds:.1f} s"
        log = (tmp_path / "super-stopped.log").read_text()
        assert "work still in hand after [rpc] stop_timeout" in log
        run.service("scheduler", "scheduler-worker")
        run.service("super", "conductor-worker")
        run.finish(db)
        print(f"\nSIGTERM to exit: {seconds:.1f} s")
    finally:
        run.stop()
