"""A request that fits only on sleeping nodes is held while they wake, then placed.

The whole path with real pieces: a live placement, ten nodes whose BMCs are
sushy-tools' Redfish emulator, the power controller (in this process, its
clock stepped by the test), and the scheduler and conductors as their
console scripts on RabbitMQ, fed by ``build-submit``. The controller powers
seven idle nodes off; a request for five whole nodes finds three on, is
held pending with the hosts it waits for (nothing claimed), makes the
controller wake two, and is placed once they are on, on nodes that are on
only.
"""

import json
import os
import subprocess
import sys
import uuid

from joule import placement_client
from joule.placement_client import url_path
from powerpolicy import controller as controller_mod
from powerpolicy import metrics as metrics_mod
from tests import processes
from tests.functional.power import power_nodes
from tests.functional.power import redfish_emulator
from tests.functional.power.redfish_emulator import NODES

BIN = os.path.dirname(sys.executable)


def _services_conf(path, vhost, placement_url):
    path.write_text(
        "\n".join(
            [
                "[DEFAULT]",
                f"transport_url = rabbit://guest:guest@127.0.0.1:5672/{vhost}",
                "[placement_client]",
                f"endpoint = {placement_url}",
                "[conductor]",
                "wake_retry_interval = 1",
                "wake_wait_seconds = 120",
                "[filter_scheduler]",
                "write_reports = false",
            ]
        )
        + "\n"
    )


def _request(count, vcpu):
    return {
        "version": "1.4",
        "request_id": f"req-wake-{uuid.uuid4().hex[:6]}",
        "project_id": "proj",
        "user_id": "usr",
        "instance_uuids": [str(uuid.uuid4()) for _ in range(count)],
        "resources": {"VCPU": vcpu, "MEMORY_MB": 1024},
    }


def test_a_request_held_while_nodes_wake_is_placed_on_nodes_that_are_on(
    live_server, db, tmp_path, emulator, vhost
):
    api = placement_client.PlacementClient.for_endpoint(live_server.url)
    rps = {name: power_nodes.register(api, db, name) for name in NODES}
    name_of = {rp: name for name, rp in rps.items()}
    now = [1000.0]
    bmcs = redfish_emulator.bmc_file(tmp_path, emulator, "pw")
    conf = power_nodes.suspend_conf(0.1, 2, **redfish_emulator.driver_options(bmcs))
    ctl = controller_mod.Controller(conf, api, metrics_mod.Metrics(), clock=lambda: now[0])

    def tick(step=60):
        now[0] += step
        return ctl.tick()

    # 7 of 10 asleep: the family's performance node and two spares stay on.
    tick()
    tick()

    def asleep_off():
        tick(redfish_emulator.WAIT_STEP)
        return sum(s == "off" for s in power_nodes.states(api).values()) == 7

    processes.until("seven nodes off", asleep_off, timeout=90, every=1.0)

    env = dict(os.environ)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    procs = processes.Services(tmp_path, env)
    services = tmp_path / "services.conf"
    _services_conf(services, vhost, live_server.url)
    cf = ["--config-file", str(services)]
    submit = None
    try:
        for proc in (
            procs.start("scheduler", "scheduler-worker", *cf),
            procs.start("super", "conductor-worker", *cf),
            procs.start("cell1", "conductor-worker", *cf, "--cell", "cell1"),
        ):
            processes.wait_ready(tmp_path, proc)

        # Five whole nodes: three are on, two must wake.
        request = _request(5, 64)
        requests_file = tmp_path / "requests.jsonl"
        requests_file.write_text(json.dumps(request) + "\n")
        submit = subprocess.Popen(
            [os.path.join(BIN, "build-submit"), *cf, "--requests", str(requests_file)]
            + ["--json", "--timeout", "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        super_log = tmp_path / "super.log"
        processes.until(
            "the request held",
            lambda: "waiting for 2 host(s) of family" in super_log.read_text(errors="replace"),
            timeout=60,
        )
        records = api.list_build_requests(request_id=request["request_id"])
        assert sorted(r["instance_uuid"] for r in records) == sorted(request["instance_uuids"])
        assert {r["status"] for r in records} == {"pending"}
        for instance in request["instance_uuids"]:  # nothing claimed while it waits
            body = api.request("GET", url_path("allocations", instance)).json()
            assert body["allocations"] == {}

        # The controller sees the pending work and wakes two off nodes.
        woken = {t.name for t in tick().power_transitions if t.after == "waking"}
        assert len(woken) == 2

        def woken_on():
            tick(redfish_emulator.WAIT_STEP)
            return all(power_nodes.states(api)[n] == "on" for n in woken)

        processes.until("the woken nodes on", woken_on, timeout=90, every=1.0)
        out, err = submit.communicate(timeout=120)
        assert submit.returncode == 0, err[-3000:]
        outcomes = [json.loads(line) for line in out.splitlines()]
        placed = {o["instance_uuid"]: o["host_uuid"] for o in outcomes if "instance_uuid" in o}
        assert {o["status"] for o in outcomes if "instance_uuid" in o} == {"placed"}
        assert sorted(placed) == sorted(request["instance_uuids"])

        # One instance per node, each on a node that is on: the three that
        # stayed on and the two woken for it; the other five still off.
        hosts = [name_of[h] for h in placed.values()]
        assert len(set(hosts)) == 5
        states = power_nodes.states(api)
        assert all(states[h] in (None, "on") for h in hosts), states
        assert woken <= set(hosts)
        assert sum(s == "off" for s in states.values()) == 5
        for instance, host in placed.items():
            body = api.request("GET", url_path("allocations", instance)).json()
            assert set(body["allocations"]) == {host}
        assert "held, waiting for 2 host(s) of family" in super_log.read_text()
    except BaseException:
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        raise
    finally:
        if submit is not None and submit.poll() is None:
            submit.kill()
            submit.wait()
        procs.stop_all()
