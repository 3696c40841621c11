"""Builds through the node agents, every service a real process over
RabbitMQ, on SQLite and PostgreSQL placement (issue 25's acceptance).

Three ``node-agent`` processes (distinct hosts, each with its own cgroup
parent in the machine's cgroup tree, the ``exec`` driver) register their
nodes; a scheduler worker, a super conductor and a cell conductor with
``[conductor] compute_driver = agent`` build what ``build-submit`` sends.
A stream of 200 real commands (sleeping and exiting 0, exiting 1 at start
on two hosts of three so that they move to an alternate, exceeding their
memory limit, deleted with ``joule-server delete`` while they run): each
running instance's cgroup limits are its claim, each instance ends once
with the state its command earned, no allocation is left and the
allocations audit is clean. Then the lifecycle: ``joule-server``'s list,
show and delete, and ``kill -9`` of an agent with running instances and its
restart.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest

from joule import placement_client
from tests import node_trees
from tests import processes
from tests.functional.agent.conftest import CGROUP_ROOT

BIN = os.path.dirname(sys.executable)
HOSTS = ("node-0", "node-1", "node-2")
SLACK = 60.0
# The stream of the acceptance test (JOULE_AGENT_TEST_INSTANCES for a quick look).
STREAM = int(os.environ.get("JOULE_AGENT_TEST_INSTANCES", "200"))
# Seconds after which a silent agent's host is taken for down.
DOWN_TIME = 4


def _until(what, check, timeout=SLACK, every=0.2):
    return processes.until(what, check, timeout, every)


class Cloud:
    def __init__(self, tmp_path, db_url, vhost, parent, start_grace):
        self.tmp = tmp_path
        self.start_grace = start_grace
        self.parent = parent
        self.env = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=db_url)
        self.env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.procs = processes.Services(tmp_path, self.env)
        self.vhost = vhost
        self.agents = {}

    def start_placement(self, db_url):
        sync = processes.manage(db_url, "db", "sync", timeout=120, env=self.env)
        assert sync.returncode == 0, sync.stderr
        port = processes.free_port()
        self.url = f"http://127.0.0.1:{port}"
        api = self.procs.start("placement-api", "placement-api", "--port", str(port))
        processes.wait_http(self.url + "/", api)
        self.client = placement_client.PlacementClient.for_endpoint(self.url)

    def _bus_lines(self):
        return [
            "[DEFAULT]",
            f"transport_url = rabbit://guest:guest@127.0.0.1:5672/{self.vhost}",
            "[placement]",
            "auth_type = noauth",
            f"endpoint_override = {self.url}",
        ]

    def agent_conf(self, host):
        root = self.tmp / host
        proc, sys_ = node_trees.write("bare", root)
        conf = root / "node-agent.conf"
        conf.write_text(
            "\n".join(
                [
                    *self._bus_lines(),
                    "[agent]",
                    f"host = {host}",
                    f"procfs_root = {proc}",
                    f"sysfs_root = {sys_}",
                    "report_interval = 1",
                    "cell = cell1",
                    "gpus = false",
                    "compute = true",
                    "driver = exec",
                    f"state_dir = {root / 'state'}",
                    f"cgroup_root = {CGROUP_ROOT}",
                    f"cgroup_parent = {self.parent}/{host}",
                    # A command that fails at start must be seen failing within
                    # the window on a loaded machine (0.5 s was not, under CI).
                    f"start_grace = {self.start_grace:g}",
                    "delete_grace = 2",
                    "instance_poll_interval = 0.2",
                    # Room for the stream's 200 instances at once on three
                    # 4-CPU nodes (sleeping commands, mostly).
                    "initial_cpu_allocation_ratio = 128",
                    "initial_ram_allocation_ratio = 4",
                ]
            )
            + "\n"
        )
        return conf

    def start_agent(self, host):
        conf = self.agent_conf(host)
        proc = self.procs.start(host, "node-agent", "--config-file", str(conf))
        processes.wait_ready(self.tmp, proc)
        self.agents[host] = proc
        return proc

    def start_services(self):
        conf = self.tmp / "services.conf"
        conf.write_text(
            "\n".join(
                [
                    *self._bus_lines(),
                    "[conductor]",
                    "compute_driver = agent",
                    "build_timeout = 20",
                    "[filter_scheduler]",
                    "write_reports = false",
                    "[scheduler]",
                    f"service_down_time = {DOWN_TIME}",
                ]
            )
            + "\n"
        )
        self.conf = conf
        cf = ["--config-file", str(conf)]
        started = [
            self.procs.start("scheduler", "scheduler-worker", *cf),
            self.procs.start("super", "conductor-worker", *cf),
            self.procs.start("cell1", "conductor-worker", *cf, "--cell", "cell1"),
        ]
        for proc in started:
            processes.wait_ready(self.tmp, proc)

    def submit(self, specs):
        path = self.tmp / f"specs-{uuid.uuid4().hex[:6]}.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in specs))
        res = subprocess.run(
            [
                os.path.join(BIN, "build-submit"),
                "--config-file",
                str(self.conf),
                "--requests",
                str(path),
                "--json",
                "--timeout",
                "180",
            ],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=240,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        return {
            o["instance_uuid"]: o
            for o in map(json.loads, res.stdout.splitlines())
            if "instance_uuid" in o
        }

    def server(self, *args, check=True):
        """``joule-server ARGS -f json``: its parsed output (or the result)."""
        res = subprocess.run(
            [
                os.path.join(BIN, "joule-server"),
                "--config-file",
                str(self.conf),
                *args,
                "-f",
                "json",
            ],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        if not check:
            return res
        assert res.returncode == 0, res.stdout + res.stderr
        return json.loads(res.stdout) if res.stdout.lstrip().startswith(("{", "[")) else res.stdout

    def logs(self):
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
            for p in sorted(self.tmp.glob("*.log"))
        )


def _spec(name, command, memory_mb=64, vcpu=1, env=None):
    return {
        "version": "1.4",
        "request_id": f"req-{name}-{uuid.uuid4().hex[:6]}",
        "project_id": "proj",
        "user_id": "usr",
        "instance_uuids": [str(uuid.uuid4())],
        "resources": {"VCPU": vcpu, "MEMORY_MB": memory_mb},
        "workload": {"command": ["sh", "-c", command], "env": env or {}},
    }


def _cgroup_limits(parent, host, instance):
    cpu = os.path.join(CGROUP_ROOT, "cpu", parent, host, instance)
    mem = os.path.join(CGROUP_ROOT, "memory", parent, host, instance)
    if os.path.isdir(os.path.join(CGROUP_ROOT, "cpu")):
        quota = int(open(os.path.join(cpu, "cpu.cfs_quota_us")).read())
        period = int(open(os.path.join(cpu, "cpu.cfs_period_us")).read())
        memory = int(open(os.path.join(mem, "memory.limit_in_bytes")).read())
    else:  # cgroup v2
        base = os.path.join(CGROUP_ROOT, parent, host, instance)
        quota, period = map(int, open(os.path.join(base, "cpu.max")).read().split())
        memory = int(open(os.path.join(base, "memory.max")).read())
    return quota / period, memory // (1024 * 1024)


@pytest.fixture
def start_grace():
    """The agents' [agent] start_grace; a test parametrizes it to change it."""
    return 2


@pytest.fixture
def cloud(tmp_path, empty_db_url, vhost, cgroup_parent, start_grace):
    c = Cloud(tmp_path, empty_db_url, vhost, cgroup_parent, start_grace)
    try:
        c.start_placement(empty_db_url)
        for host in HOSTS:
            c.start_agent(host)
        _until("three nodes", lambda: len(c.client.list_nodes()) == 3)
        c.start_services()
        yield c
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.procs.stop_all()


def test_the_lifecycle_delete_and_an_agent_killed_and_restarted(cloud):
    # The instances end when the test opens their gate, not on a clock: a
    # loaded machine stretches every step between submit and restart, and an
    # instance that ended too early (or too late) tested the wrong thing.
    gates = cloud.tmp / "gates"
    gates.mkdir()

    def until_gate(name, then=""):
        return f"while [ ! -e {gates / name} ]; do sleep 0.1; done{then}"

    long_runner = _spec("long", "sleep 60")
    survivor = _spec("survivor", until_gate("survivor"))
    ends_meanwhile = _spec("meanwhile", until_gate("meanwhile", "; exit 4"))
    specs = [long_runner, survivor, ends_meanwhile]
    # All three on one host, so that killing its agent concerns them all.
    for spec in specs:
        spec["scheduler_hints"] = {"force_hosts": ["node-1"]}
    outcomes = cloud.submit(specs)
    long_i, survivor_i, meanwhile_i = (s["instance_uuids"][0] for s in specs)
    assert {o["status"] for o in outcomes.values()} == {"placed"}
    rows = {r["instance_uuid"]: r for r in cloud.server("list")}
    assert {rows[i]["state"] for i in (long_i, survivor_i, meanwhile_i)} == {"running"}
    assert rows[long_i]["host"] == "node-1"
    assert rows[long_i]["claim"] == {outcomes[long_i]["host_uuid"]: {"VCPU": 1, "MEMORY_MB": 64}}

    # Deleted while it runs: SIGTERM, the end recorded, the claim released.
    res = cloud.server("delete", long_i, "--grace", "1", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    shown = cloud.server("show", long_i)
    assert (shown["state"], shown["claim"]) == ("deleted", {})
    assert cloud.server("delete", long_i, check=False).returncode == 0  # ended already: said so

    # kill -9 of the agent: its instances run on; the host's state is
    # unknown (never finished) while the agent is silent.
    agent = cloud.agents["node-1"]
    agent.kill()
    agent.wait()
    _until(
        "the silent host's instances shown unknown",
        lambda: cloud.server("show", survivor_i)["state"] == "unknown",
        timeout=DOWN_TIME + 30,
    )
    (gates / "meanwhile").touch()
    _until("the meanwhile instance to exit", lambda: _exited(cloud, meanwhile_i), timeout=30)
    assert cloud.server("show", meanwhile_i)["state"] == "unknown"
    assert cloud.client.get_allocations(meanwhile_i)[0]  # nothing released while unknown

    # Restarted: the survivor is found running again, the one that ended
    # meanwhile is reported with its exit status; each claim released once.
    cloud.start_agent("node-1")
    _until(
        "the meanwhile end recorded",
        lambda: cloud.server("show", meanwhile_i)["state"] == "errored",
        timeout=30,
    )
    meanwhile = cloud.server("show", meanwhile_i)
    assert (meanwhile["exit_status"], meanwhile["claim"]) == (4, {})
    _until(
        "the survivor running again",
        lambda: cloud.server("show", survivor_i)["state"] == "running",
        timeout=30,
    )
    (gates / "survivor").touch()
    _until(
        "the survivor to finish",
        lambda: cloud.server("show", survivor_i)["state"] == "finished",
        timeout=30,
    )
    assert cloud.server("show", survivor_i)["claim"] == {}
    audit = processes.manage(
        cloud.env["OS_PLACEMENT_DATABASE__CONNECTION"], "allocations", "audit", env=cloud.env
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    unknown = cloud.server("show", str(uuid.uuid4()), check=False)
    assert unknown.returncode == 1 and "no instance" in unknown.stderr


def _exited(cloud, instance):
    """Whether no process of ``instance`` is left in node-1's cgroups."""
    for controller in ("memory", ""):
        path = os.path.join(CGROUP_ROOT, controller, cloud.parent, "node-1", instance)
        if os.path.isdir(path):
            with open(os.path.join(path, "cgroup.procs")) as procs:
                return procs.read().split() == []
    return True


# The stream starts its 200 commands at once, up to 64 at a time per node
# ([agent] build_threads): on the loaded 2-core CI machine a command that
# exits 1 at once was seen exiting more than 2 s after its start (and so
# reported running, then ended), which the picky ones below must not be.
@pytest.mark.parametrize("start_grace", [5])
def test_a_stream_of_real_commands_ends_each_once_and_frees_every_claim(cloud):
    """The issue's acceptance stream: 200 instances of real commands, some
    sleeping and exiting 0, some exiting 1 at start on two hosts of three
    (moved to an alternate), some over their memory limit, some deleted
    while they run."""
    kinds = []
    for n in range(STREAM):
        if n % 10 < 5:
            kinds.append(("sleep", _spec(f"s{n}", f"sleep {1 + n % 3}", memory_mb=32 + n % 4 * 16)))
        elif n % 10 < 7:
            kinds.append(
                ("picky", _spec(f"p{n}", 'test "$JOULE_HOST" = node-2 || exit 1; sleep 1'))
            )
        elif n % 10 == 7:
            hog = "python3 -c 'x = bytearray(200 * 2**20); import time; time.sleep(5)'"
            # Over its limit after the start window: it runs, then is killed.
            wait = cloud.start_grace + 1
            kinds.append(("hog", _spec(f"h{n}", f"sleep {wait:g}; {hog}", memory_mb=40)))
        else:
            kinds.append(("deleted", _spec(f"d{n}", "sleep 120", vcpu=1 + n % 2)))
    specs = [s for _k, s in kinds]
    inst = [s["instance_uuids"][0] for s in specs]
    outcomes = cloud.submit(specs)
    assert sorted(outcomes) == sorted(inst)
    # Every instance answered once. A mover whose every host refused it
    # for capacity at that moment is a legitimate (and final) failure on
    # a busy stream; it must hold nothing (checked with the others below).
    failed = {i for i, o in outcomes.items() if o["status"] != "placed"}
    for i in failed:
        assert "would exceed the capacity" in outcomes[i]["reason"], outcomes[i]["reason"]
    assert len(failed) <= STREAM // 20, [outcomes[i]["reason"] for i in failed]
    kinds = [(k, s) for k, s in kinds if s["instance_uuids"][0] not in failed]
    refused = [i for i in inst if i in failed]
    inst = [i for i in inst if i not in failed]
    names = {cloud.client.find_provider(h)["uuid"]: h for h in HOSTS}
    # The long runners all run now: their cgroup limits are their claim.
    deleted = [(i, s) for (k, s), i in zip(kinds, inst, strict=True) if k == "deleted"]
    for i, spec in deleted:
        host = names[outcomes[i]["host_uuid"]]
        assert _cgroup_limits(cloud.parent, host, i) == (
            spec["resources"]["VCPU"],
            spec["resources"]["MEMORY_MB"],
        )
    picky = [i for (k, _s), i in zip(kinds, inst, strict=True) if k == "picky"]
    assert {names[outcomes[i]["host_uuid"]] for i in picky} == {"node-2"}
    # Two in three start elsewhere first, and move (all starting on node-2
    # at once is 1 in 3 to the power of 40).
    assert sum(outcomes[i]["rescheduled"] for i in picky) >= 1
    for i, spec in deleted:
        claim = {rp: a["resources"] for rp, a in cloud.client.get_allocations(i)[0].items()}
        assert claim == {outcomes[i]["host_uuid"]: spec["resources"]}
    # Deleted while they run, several at once.
    procs = [
        subprocess.Popen(
            [
                os.path.join(BIN, "joule-server"),
                "--config-file",
                str(cloud.conf),
                "delete",
                i,
                "--grace",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=cloud.env,
        )
        for i, _spec_ in deleted
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out

    assert all(not cloud.client.get_allocations(i)[0] for i in refused)
    _until(
        "every claim released",
        lambda: all(not cloud.client.get_allocations(i)[0] for i in inst),
        timeout=120,
        every=1.0,
    )
    want = {"sleep": "finished", "picky": "finished", "hog": "errored", "deleted": "deleted"}
    records = {r["instance_uuid"]: r for r in cloud.client.list_build_requests()}
    for (kind, _s), i in zip(kinds, inst, strict=True):
        rec = records[i]
        assert (rec["status"], rec["instance_state"]) == ("placed", want[kind]), (kind, rec)
        if kind == "hog":
            assert rec["state_reason"].startswith("killed by its memory limit (40 MiB)"), rec
    audit = processes.manage(
        cloud.env["OS_PLACEMENT_DATABASE__CONNECTION"], "allocations", "audit", env=cloud.env
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    for host in HOSTS:
        base = os.path.join(CGROUP_ROOT, "memory", cloud.parent, host)
        if os.path.isdir(base):
            assert [e.name for e in os.scandir(base) if e.is_dir()] == []


def test_a_burst_of_builds_to_one_node_is_answered_within_the_build_timeout(cloud):
    """Every build holds one of the agent's threads for [agent] start_grace
    (2 s here) while its command is watched. 96 builds to one node at once,
    as a cell conductor sends a burst that all fits there: the agent's
    default [agent] build_threads (64) answers them in two graces; on the
    bus's 8 threads it took twelve, past a 15 s build timeout."""
    from conductor import conf as cconf
    from joule import rpc

    conf = cconf.make_conf(["--config-file", str(cloud.conf)])
    # The transport is cleaned up below: its reply listener is a thread of
    # this process that, left running, retries forever once the test's
    # vhost is deleted (and its tracebacks race pytest's own parsing).
    transport = rpc.transport_of(conf)
    api = rpc.ComputeAPI(conf, transport)
    uuids = [str(uuid.uuid4()) for _ in range(96)]
    workload = {"command": ["sh", "-c", "sleep 60"], "env": {}}

    def build(i):
        try:
            return api.build_instance("node-0", i, {"VCPU": 1, "MEMORY_MB": 16}, workload, 15)
        except rpc.Unanswered as exc:
            return {"instance_uuid": i, "state": "unanswered", "reason": str(exc)}

    import concurrent.futures

    try:
        with concurrent.futures.ThreadPoolExecutor(len(uuids)) as pool:
            answers = list(pool.map(build, uuids))
        states = [a["state"] for a in answers]
        assert states == ["running"] * len(uuids), [a for a in answers if a["state"] != "running"]
    finally:
        for i in uuids:
            try:
                api.delete_instance("node-0", i, 30, grace=0)
            except rpc.Unanswered:
                pass
        transport.cleanup()
