"""The services as processes on the real RabbitMQ (issue 11's acceptance).

3 scheduler workers, 2 super conductors and 2 conductors for each of 2 cells,
started with their console scripts, place 2,000 instances (400 requests of
5; JOULE_BUS_TEST_REQUESTS=40 runs 200 for a quick look) submitted with
``build-submit`` onto a cluster with room for all of them, with 10% of
builds failing. During the run one scheduler worker, one super conductor and
one cell conductor are killed with SIGKILL and the scheduler is restarted.
Afterwards every invariant of the issue is checked against the ledger and
the simulated hypervisors, and ``placement-manage allocations audit`` finds
nothing. On SQLite and PostgreSQL placement.

Each run has its own RabbitMQ virtual host (created with rabbitmqctl and
deleted afterwards), so parallel runs on one machine never see each
other's messages.
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
# The 2,000 instances. Since the scheduler batches and the conductors
# write in bulk this is affordable in the suite: 227 s on SQLite at a load
# average of 30 (docs/benchmarks.md, "Bus"); the timeouts leave room for more.
REQUESTS = int(os.environ.get("JOULE_BUS_TEST_REQUESTS", "400"))
PER_REQUEST = 5
INSTANCES = REQUESTS * PER_REQUEST


def _write_conf(path, vhost, placement_url, state_dir, **extra):
    lines = [
        "[DEFAULT]",
        f"transport_url = rabbit://guest:guest@127.0.0.1:5672/{vhost}",
        "executor_thread_pool_size = 4",
        "[placement_client]",
        f"endpoint = {placement_url}",
        "timeout = 60",
        "[conductor]",
        "simulated_failure_rate = 0.1",
        f"simulated_state_dir = {state_dir}",
        "lease_seconds = 15",
        "sweep_interval = 1.0",
        "[rpc]",
        "call_timeout = 15",
        "call_retries = 4",
        "[filter_scheduler]",
        "host_subset_size = 3",
        "write_reports = false",
    ]
    for key, value in extra.items():
        lines.append(f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n")


def test_many_services_survive_kills_and_place_everything_once(db, db_url, vhost, tmp_path):
    # Room for all: 120 nodes x 64 VCPU = 7,680 VCPU for at most 2 x 2,000.
    bus.load_cluster(db, nodes=120, cores=64, cells=2)
    env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
    procs = processes.Services(tmp_path, env)
    state_dir = tmp_path / "hypervisors"
    state_dir.mkdir()
    try:
        port = processes.free_port()
        api = procs.start("placement-api", "placement-api", "--port", str(port), "--workers", "2")
        placement_url = f"http://127.0.0.1:{port}"
        processes.wait_http(placement_url + "/", api)
        conf = tmp_path / "services.conf"
        _write_conf(conf, vhost, placement_url, state_dir)
        cf = ["--config-file", str(conf)]
        scheds = [procs.start(f"scheduler-{n}", "scheduler-worker", *cf) for n in range(3)]
        supers = [procs.start(f"super-{n}", "conductor-worker", *cf) for n in range(2)]
        cells = [
            procs.start(f"{cell}-{n}", "conductor-worker", *cf, "--cell", cell)
            for cell in ("cell1", "cell2")
            for n in range(2)
        ]
        for proc in scheds + supers + cells:
            processes.wait_ready(tmp_path, proc)

        specs = tmp_path / "specs.jsonl"
        specs.write_text("\n".join(bus.spec_lines(REQUESTS, PER_REQUEST, vcpu=2)) + "\n")
        out_path = tmp_path / "submit.out"
        start = time.monotonic()
        with open(out_path, "w") as out:
            submit = subprocess.Popen(
                [
                    os.path.join(BIN, "build-submit"),
                    *cf,
                    "--requests",
                    str(specs),
                    "--json",
                    "--timeout",
                    "1200",
                    "--resend-after",
                    "20",
                ],
                stdout=out,
                stderr=open(tmp_path / "submit.err", "w"),
                env=env,
            )
            # Kill one of each kind once a third of the outcomes are in.
            while submit.poll() is None:
                if sum(1 for _ in open(out_path)) >= INSTANCES // 3:
                    break
                time.sleep(0.2)
            for victim in (scheds[0], supers[0], cells[0]):
                victim.send_signal(signal.SIGKILL)
                victim.wait()
            processes.wait_ready(
                tmp_path, procs.start("scheduler-restarted", "scheduler-worker", *cf)
            )
            rc = submit.wait(timeout=1300)
        seconds = time.monotonic() - start
        lines = [json.loads(x) for x in out_path.read_text().splitlines() if x.strip()]
        summary = lines[-1]
        assert rc == 0, (summary, (tmp_path / "submit.err").read_text()[-3000:])
        assert summary["instances"] == INSTANCES and summary["unanswered"] == 0
        outcomes = [x for x in lines[:-1] if x.get("status") in ("placed", "failed")]
        assert len(outcomes) == INSTANCES
        assert summary["placed"] + summary["failed"] == INSTANCES
        # 10% of builds fail, but alternates absorb nearly all of them.
        assert summary["rescheduled"] > 0
        assert summary["placed"] >= INSTANCES * 0.95, summary

        running = processes.running_instances(state_dir)
        counts = bus.check_invariants(db, outcomes, running)
        assert counts["placed"] == summary["placed"]
        assert len(running) == counts["placed"]  # each built once, nothing else runs
        audit = subprocess.run(
            [os.path.join(BIN, "placement-manage"), "allocations", "audit"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
        print(
            f"\n{INSTANCES} instances through the bus in {seconds:.1f} s "
            f"({summary['instances_per_second']}/s): {summary}"
        )
    finally:
        procs.stop_all()
