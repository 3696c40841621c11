"""node-agent as real processes against a real placement-api (SQLite and PostgreSQL).

Five ``node-agent`` processes, each with its own ``[agent] host`` and fake
/proc and /sys (tests/node_trees.py: two Intel RAPL nodes, an AMD node
capped through cpufreq, a cpufreq-only aarch64 node and a node with
neither; one CPU model string, so they are one hardware family), register;
one ``power-controller --once`` moves four of them to eco and, within an
agent interval, each tree holds its eco limit and its twin's status says
so; ``kill -9`` of one agent makes its node unschedulable within
``service_down_time`` (NoValidHost names the reason) and its restart makes
it schedulable again, without writing anything to placement but heartbeats
(placement's own request counters).
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests

from joule import placement_client
from scheduler import conf as sconf_mod
from scheduler import worker
from tests import node_trees
from tests import processes

BIN = os.path.dirname(sys.executable)
MODEL = "Joule Test CPU 9000"
# name -> (tree kind, extra [agent] options)
NODES = {
    "node-0": ("intel", {}),
    "node-1": ("intel", {}),
    "node-2": ("amd", {"cpu_nominal_watts": "280"}),
    "node-3": ("cpufreq", {"cpu_nominal_watts": "150"}),
    "node-4": ("bare", {}),
}
INTERVAL = 0.5
DOWN_TIME = 3
# Seconds of slack for a busy 2-core machine shared with other test runs.
SLACK = 20.0
PROVIDER_CONFIG = """meta:
  schema_version: '1.0'
providers:
  - identification: {uuid: $COMPUTE_NODE}
    inventories:
      additional:
        - CUSTOM_FPGA: {total: 2}
"""


def _stop(proc, sig=signal.SIGTERM):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _until(what, check, timeout=SLACK, every=0.2):
    return processes.until(what, check, timeout, every)


def _writes_by_route(url):
    """{(route, method): count} of placement's non-GET requests (its /metrics)."""
    out = {}
    text = requests.get(url + "/metrics", timeout=30).text
    for line in text.splitlines():
        match = re.match(r"^placement_api_requests_total\{(.*)\} (\S+)$", line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels["method"] in ("GET", "HEAD"):
            continue
        key = (labels["route"], labels["method"])
        out[key] = out.get(key, 0) + float(match.group(2))
    return out


class Cluster:
    def __init__(self, tmp_path, db_url):
        self.tmp = tmp_path
        self.db_url = db_url
        self.env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url, TMPDIR=str(tmp_path))
        self.env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.api = None
        self.agents = {}
        self.trees = {}
        self.url = None

    def start_placement(self):
        sync = processes.manage(self.db_url, "db", "sync", timeout=120, env=self.env)
        assert sync.returncode == 0, sync.stderr
        port = processes.free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.api_log = self.tmp / "api.log"
        with open(self.api_log, "w") as log:
            self.api = subprocess.Popen(
                [os.path.join(BIN, "placement-api"), "--port", str(port), "--threads", "4"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def up():
            if self.api.poll() is not None:
                raise AssertionError(self.api_log.read_text())
            try:
                return requests.get(self.url + "/", timeout=5).status_code == 200
            except (requests.ConnectionError, requests.Timeout):
                return False

        _until("placement-api", up, timeout=60)
        self.client = placement_client.PlacementClient.for_endpoint(self.url)

    def write_config(self, name):
        kind, extra = NODES[name]
        root = self.tmp / name
        proc, sys_ = node_trees.write(kind, root, model=MODEL)
        self.trees[name] = sys_
        lines = [
            "[agent]",
            f"host = {name}",
            f"procfs_root = {proc}",
            f"sysfs_root = {sys_}",
            f"report_interval = {INTERVAL}",
            "cell = cell1",
            "labels = role:worker",
            "gpus = false",
        ]
        lines += [f"{k} = {v}" for k, v in extra.items()]
        if name == "node-4":
            path = root / "provider.yaml"
            path.write_text(PROVIDER_CONFIG)
            lines.append(f"provider_config = {path}")
        lines += ["[placement]", "auth_type = noauth", f"endpoint_override = {self.url}"]
        conf = root / "node-agent.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def start_agent(self, name):
        conf = self.tmp / name / "node-agent.conf"
        if not conf.exists():
            conf = self.write_config(name)
        log = open(self.tmp / f"{name}.log", "a")
        self.agents[name] = subprocess.Popen(
            [os.path.join(BIN, "node-agent"), "--config-file", str(conf)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def nodes(self):
        return {n["name"]: n for n in self.client.list_nodes()}

    def stop(self):
        for proc in self.agents.values():
            _stop(proc)
        if self.api is not None:
            _stop(self.api)

    def logs(self):
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log"))
        )


@pytest.fixture
def cluster(tmp_path, empty_db_url):
    c = Cluster(tmp_path, empty_db_url)
    try:
        c.start_placement()
        yield c
    finally:
        c.stop()


def _eco_in_force(cluster, name, twin):
    """What the fake tree of ``name`` must hold under the eco twin."""
    sys_ = cluster.trees[name]
    kind = NODES[name][0]
    cap = twin["cpu_cap_watts"]
    if kind == "intel":
        per_package = int(round(cap / 2 * 1e6))
        return [node_trees.rapl_limit(sys_, p) for p in (0, 1)] == [per_package] * 2
    if kind in ("amd", "cpufreq"):
        nominal = float(NODES[name][1]["cpu_nominal_watts"])
        high = 3_800_000 if kind == "amd" else 3_000_000
        want = int(high * cap / nominal)
        cpus = 16 if kind == "amd" else 8
        return [node_trees.scaling_max(sys_, c) for c in range(cpus)] == [want] * cpus
    return True  # nothing to cap on the bare node


def _scheduler(cluster):
    conf = sconf_mod.make_conf(
        overrides={
            ("placement", "endpoint_override"): cluster.url,
            ("scheduler", "service_down_time"): DOWN_TIME,
            ("filter_scheduler", "write_reports"): False,
        }
    )
    return worker.Scheduler(conf, placement_client.PlacementClient.from_conf(conf))


def _fpga_spec():
    return {
        "version": "1.0",
        "resources": {"CUSTOM_FPGA": 1},
        "project_id": "proj",
        "user_id": "usr",
    }


@pytest.mark.slow
def test_five_agents_register_cap_die_and_come_back(cluster):
    started = time.monotonic()
    for name in NODES:
        cluster.start_agent(name)
    try:
        nodes = _until(
            "five registered nodes with heartbeats",
            lambda: (
                (n := cluster.nodes())
                and len(n) == 5
                and all(x["heartbeat_at"] and x["hardware"] for x in n.values())
                and n
            ),
            timeout=60,
        )
    except AssertionError:
        raise AssertionError(cluster.logs()) from None
    # Registration: nova's inventories, the hardware record the controller reads.
    inv = cluster.client.provider_inventories(nodes["node-0"]["uuid"])
    assert inv["VCPU"]["total"] == 16 and inv["VCPU"]["allocation_ratio"] == 4.0
    assert inv["MEMORY_MB"]["total"] == 512 * 1024 and inv["MEMORY_MB"]["reserved"] == 512
    assert cluster.client.provider_inventories(nodes["node-4"]["uuid"])["CUSTOM_FPGA"]["total"] == 2
    hw = {name: n["hardware"] for name, n in nodes.items()}
    assert hw["node-0"]["cpu_max_cap_watts"] == 540.0 and hw["node-0"]["cpu_sockets"] == 2
    assert hw["node-2"]["cpu_max_cap_watts"] == 280.0
    assert hw["node-3"]["cpu_max_cap_watts"] == 150.0
    assert hw["node-4"]["cpu_max_cap_watts"] is None
    assert {n["labels"]["family"] for n in nodes.values()} == {f"cpu:{MODEL}"}
    assert all(n["cell"] == "cell1" and n["labels"]["role"] == "worker" for n in nodes.values())
    _gen, traits = cluster.client.get_traits(nodes["node-0"]["uuid"])
    assert "HW_CPU_X86_AVX512F" in traits and "HW_CPU_HYPERTHREADING" in traits
    _gen, traits = cluster.client.get_traits(nodes["node-3"]["uuid"])
    assert "HW_CPU_AARCH64_ATOMICS" in traits

    # One power-controller tick: one node of the family stays performance,
    # four go eco.
    power_conf = cluster.tmp / "power.conf"
    power_conf.write_text(
        "[power]\npolicy = static_partition\nstatic_hp_frac = 0.2\n"
        f"[placement]\nauth_type = noauth\nendpoint_override = {cluster.url}\n"
    )
    tick = subprocess.run(
        [os.path.join(BIN, "power-controller"), "--config-file", str(power_conf), "--once"],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tick.returncode == 0, tick.stderr
    ticked = time.monotonic()
    twins = {name: n["twin"] for name, n in cluster.nodes().items()}
    eco = sorted(name for name, t in twins.items() if t["schedulable_class"] == "eco")
    assert len(eco) == 4, twins

    def in_force():
        now = cluster.nodes()
        for name in eco:
            twin = now[name]["twin"]
            status = twin.get("status") or {}
            if status.get("observed_generation") != twin["generation"]:
                return False
            if not _eco_in_force(cluster, name, twin):
                return False
        return now

    now = _until("eco caps in force and reported", in_force, timeout=INTERVAL + SLACK)
    applied_after = time.monotonic() - ticked
    for name in eco:
        status = now[name]["twin"]["status"]
        kind = NODES[name][0]
        cpu = status["cpu"]
        assert status["profile"] == "eco"
        if kind == "intel":
            assert (cpu["method"], cpu["result"]) == ("rapl", "applied")
            assert cpu["applied_watts"] == pytest.approx(now[name]["twin"]["cpu_cap_watts"])
            assert [d["name"] for d in cpu["domains"]] == ["package-0", "package-1"]
        elif kind in ("amd", "cpufreq"):
            assert (cpu["method"], cpu["result"]) == ("cpufreq", "applied")
        else:
            assert (cpu["method"], cpu["result"]) == ("none", "unsupported")
            assert "CPU caps cannot be applied" in cpu["reason"]

    # kill -9 of the agent of the only node with an FPGA: unschedulable within
    # service_down_time, and NoValidHost says why.
    sched = _scheduler(cluster)
    [[sel, *_]] = sched.select_destinations({**_fpga_spec(), "instance_uuids": [_uuid()]})
    assert sel.host_name == "node-4"
    cluster.client.delete_allocations(sel.instance_uuid)
    cluster.agents["node-4"].send_signal(signal.SIGKILL)
    cluster.agents["node-4"].wait(timeout=10)
    killed = time.monotonic()

    def refused():
        try:
            [[placed, *_]] = sched.select_destinations(
                {**_fpga_spec(), "instance_uuids": [_uuid()]}
            )
        except worker.NoValidHost as exc:
            return str(exc)
        cluster.client.delete_allocations(placed.instance_uuid)  # not down yet
        return None

    message = _until("NoValidHost for the dead node", refused, timeout=DOWN_TIME + SLACK)
    down_after = time.monotonic() - killed
    assert "ComputeFilter removed 1" in message and "service_down_time" in message, message
    assert down_after >= DOWN_TIME - 1  # not before its time
    age = cluster.nodes()["node-4"]["heartbeat_age_seconds"]
    assert age > DOWN_TIME

    # The agent comes back with the same hardware: schedulable again, and its
    # start-up wrote nothing to placement but heartbeats.
    before = _writes_by_route(cluster.url)
    cluster.start_agent("node-4")

    def placed():
        try:
            return sched.select_destinations({**_fpga_spec(), "instance_uuids": [_uuid()]})
        except worker.NoValidHost:
            return None

    [[sel, *_]] = _until("the node schedulable again", placed, timeout=SLACK)
    assert sel.host_name == "node-4"
    cluster.client.delete_allocations(sel.instance_uuid)
    after = _writes_by_route(cluster.url)
    changed = {
        key: after.get(key, 0) - before.get(key, 0)
        for key in set(after) | set(before)
        if after.get(key, 0) != before.get(key, 0)
    }
    heartbeat = ("/nodes/<uuid>/heartbeat", "POST")
    claims = {("/allocations", "POST"), ("/allocations/<consumer_uuid>", "PUT")}
    claims |= {("/allocations/<consumer_uuid>", "DELETE")}
    assert changed.pop(heartbeat, 0) > 0
    assert set(changed) <= claims, changed  # the scheduler's claims, nothing of the agent
    print(
        f"\nregistered, capped after {applied_after:.1f}s, down after {down_after:.1f}s, "
        f"total {time.monotonic() - started:.1f}s"
    )


def _uuid():
    import uuid

    return str(uuid.uuid4())
