"""The build path under faults beyond a kill (issue 23), audited afterwards.

Usage (from the top of a checkout, as root: a private PostgreSQL runs as
the ``postgres`` user, the network cut needs ``ip netns``):

    python -m benchmarks.build_faults [--fault none|rabbitmq|postgresql|
        placement-stall|netcut|all] [--instances 2000] [--inventory 5k | --nodes N]
        [--per-request 1] [--schedulers 2] [--supers 2] [--cell-conductors 1]
        [--requests-per-message N] [--failure-rate R] [--fault-seconds S] [--keep]

Each fault is one run on infrastructure of this benchmark's own, so that
nothing shared is disturbed: a private PostgreSQL server
(tests/private_postgres.py; a fresh database per run, the inventory loaded
with ``placement-manage inventory load --cells 2``) and a private RabbitMQ
node (a virtual host per run). ``placement-api``, ``--schedulers``
scheduler workers, ``--supers`` super conductors and ``--cell-conductors``
conductors per cell run with their console scripts and the services'
shipped defaults; what a run changes is printed first (the addresses of
the broker and placement, the simulated hypervisors' state directory the
audit reads, and what a fault needs). ``build-submit --json`` casts
``--instances`` instances (``--per-request`` per request spec, 1 VCPU and
256 MB each, their uuids chosen here); once a third of the outcomes are in,
the fault is injected:

- ``rabbitmq``: the broker's application stopped (``rabbitmqctl stop_app``)
  for 15 s, then started again (its queues are not durable: what they held
  is gone);
- ``postgresql``: placement's database server stopped (fast) for 15 s;
- ``placement-stall``: every placement-api process SIGSTOPped for
  ``[rpc] call_timeout`` + 10 s (40 s), then SIGCONTed;
- ``netcut``: a further conductor of cell1 runs in a network namespace of
  its own, reaching the broker and placement over a veth pair; the link
  goes down for ``[conductor] lease_seconds`` + 20 s (80 s), then up.

``--failure-rate R`` makes that share of builds fail (``[conductor]
simulated_failure_rate``; shipped 0), so that rescheduling and failed
instances are exercised too. ``--fault-seconds`` replaces the fault's
duration; ``none`` injects nothing (the operator run: ``--fault none
--inventory 5k --instances 1500``).
After build-submit finished, the audit reads its JSON lines, placement's
database (allocations and build requests) and the simulated hypervisors'
state, and counts: instances lost (never answered, or answered placed and
running nowhere), answered twice, missing allocations (a placed instance
that does not hold exactly its resources on exactly its host), leaked
allocations (an allocation anywhere else: on another host, of a failed,
refused or unanswered instance, of a consumer nobody asked for), double
builds (running elsewhere than its outcome says, or though answered failed
or refused, or answered placed twice), refused requests holding
allocations, records that disagree with the outcomes (pending, another
status or host, failed without a reason), over-committed inventories, and
``placement-manage allocations audit``'s exit status. One summary line per
fault, with the answers per second up to the last answer (timed apart from
build-submit's exit), when the fault came, how long after it ended the last
answer came, and the refusals' errors; exit status 1 when any counter is
not 0, build-submit left an instance unanswered, or the fault never came
(the run was over first), the work directory then kept for its logs.
docs/benchmarks.md, "Build path under faults (issue 23)", has the figures.
"""

import argparse
import collections
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from benchmarks import bus_throughput
from placement import db as db_mod
from tests import bus
from tests import private_postgres
from tests import processes

BIN = os.path.dirname(sys.executable)
FAULTS = ("rabbitmq", "postgresql", "placement-stall", "netcut")
CELLS = ("cell1", "cell2")
# Shipped defaults the fault durations are measured against (joule/rpc.py,
# conductor/conf.py): a stall must outlast a call, a cut a lease.
CALL_TIMEOUT = 30
LEASE_SECONDS = 60
DOWN_SECONDS = {
    "rabbitmq": 15,
    "postgresql": 15,
    "placement-stall": CALL_TIMEOUT + 10,
    "netcut": LEASE_SECONDS + 20,
}
BROKER_USER = "joule"  # guest may only log in from loopback; netcut is not
RESOURCES = {"VCPU": 1, "MEMORY_MB": 256}  # what tests/bus.py spec_lines asks
BUILD_SUBMIT_TIMEOUT = 1800


def _rabbit_bindir():
    # The scripts behind the packaged wrappers (which switch to the rabbitmq
    # user, whose Erlang cookie is not ours): this node runs as we do.
    return os.path.dirname(os.path.realpath(shutil.which("rabbitmqctl")))


class PrivateBroker:
    """A RabbitMQ node of this run's own on free ports (listening on every
    address, for the namespace), stopped and removed at the end: the
    machine's broker is never restarted."""

    def __init__(self, workdir):
        self.dir = workdir / "broker"
        self.dir.mkdir()
        self.node = f"jfault{uuid.uuid4().hex[:8]}@localhost"
        self.port = processes.free_port()
        self.password = uuid.uuid4().hex
        (self.dir / "enabled_plugins").write_text("")
        self.env = dict(
            os.environ,
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(processes.free_port()),
            RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.dir / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(self.dir / "none"),
        )
        self.proc = None

    def ctl(self, *args, timeout=120):
        return subprocess.run(
            [os.path.join(_rabbit_bindir(), "rabbitmqctl"), "-n", self.node, *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self):
        with open(self.dir / "server.out", "wb") as out:
            # A session of its own: its Erlang children are stopped with it.
            self.proc = subprocess.Popen(
                [os.path.join(_rabbit_bindir(), "rabbitmq-server")],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 180
        while True:
            try:
                self.ctl("await_startup", timeout=180)
                break
            except subprocess.CalledProcessError:
                # Not up yet: the node is still booting.
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(1)
        self.ctl("add_user", BROKER_USER, self.password)
        return self

    def add_vhost(self, name):
        self.ctl("add_vhost", name)
        self.ctl("set_permissions", "-p", name, BROKER_USER, ".*", ".*", ".*")

    def url(self, host, vhost):
        return f"rabbit://{BROKER_USER}:{self.password}@{host}:{self.port}/{vhost}"

    def restart(self, seconds):
        self.ctl("stop_app")
        time.sleep(seconds)
        self.ctl("start_app")

    def destroy(self):
        if self.proc is None:
            return
        try:
            self.ctl("stop", timeout=60)
            self.proc.wait(timeout=60)
        except (subprocess.SubprocessError, OSError):
            # The Erlang VM may outlive the script that started it.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class Namespace:
    """A network namespace with a veth pair to the root namespace on a
    private /30; ``cut()`` takes the root side's link down, ``mend()`` up."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.name = f"jfault-{tag}"
        self.root_if, self.ns_if = f"jf{tag}r", f"jf{tag}n"
        net = f"10.231.{random.randint(1, 254)}"
        self.root_addr, self.ns_addr = f"{net}.1", f"{net}.2"

    def create(self):
        _ip("netns", "add", self.name)
        _ip("link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("link", "set", self.ns_if, "netns", self.name)
        _ip("addr", "add", f"{self.root_addr}/30", "dev", self.root_if)
        _ip("link", "set", self.root_if, "up")
        _ip("-n", self.name, "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
        _ip("-n", self.name, "link", "set", self.ns_if, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        return self

    def command(self, script, *args):
        return [shutil.which("ip"), "netns", "exec", self.name, os.path.join(BIN, script), *args]

    def cut(self):
        _ip("link", "set", self.root_if, "down")

    def mend(self):
        _ip("link", "set", self.root_if, "up")

    def destroy(self):
        # Deleting one end of a veth pair deletes both.
        _ip("link", "del", self.root_if, check=False)
        _ip("netns", "del", self.name, check=False)


def _specs(path, args, fault):
    """Write the request specs; {request_id: [instance uuids]}."""
    lines = bus.spec_lines(
        args.instances // args.per_request, args.per_request, vcpu=RESOURCES["VCPU"], prefix=fault
    )
    path.write_text("\n".join(lines) + "\n")
    specs = [json.loads(line) for line in lines]
    return {s["request_id"]: s["instance_uuids"] for s in specs}


def _conf(path, transport_url, placement_url, state_dir, failure_rate=None):
    failures = "" if failure_rate is None else f"simulated_failure_rate = {failure_rate}\n"
    path.write_text(
        f"[DEFAULT]\ntransport_url = {transport_url}\n"
        f"[placement]\nauth_type = noauth\nendpoint_override = {placement_url}\n"
        f"[conductor]\nsimulated_state_dir = {state_dir}\n{failures}"
    )
    return ["--config-file", str(path)]


def override_lines(fault):
    """What a run sets that is not a shipped default, as printed."""
    lines = [
        "every service: [DEFAULT] transport_url = the run's private broker and vhost",
        "every service: [placement] auth_type = noauth, endpoint_override = the run's placement",
        "conductors: [conductor] simulated_state_dir = the run's directory (the audit reads it)",
    ]
    if fault == "netcut":
        lines += [
            "placement-api: --host 0.0.0.0 and [api] allow_insecure_noauth = true "
            "(the namespace's conductor reaches it over the veth link)",
            "one more cell1 conductor-worker, in its own network namespace, whose "
            "transport_url and endpoint_override use the veth's root address",
        ]
    return lines


class Deployment:
    """One run's placement database, services and hypervisor state."""

    def __init__(self, workdir, env, db_url):
        self.workdir = workdir
        self.db_url = db_url
        self.state_dir = workdir / "hypervisors"
        self.state_dir.mkdir()
        self.procs = processes.Services(workdir, env)
        self.api = None
        self.cf = None

    def start_api(self, fault):
        port = processes.free_port()
        host = "0.0.0.0" if fault == "netcut" else "127.0.0.1"
        self.procs.env = dict(self.procs.env)
        if fault == "netcut":
            self.procs.env["OS_API__ALLOW_INSECURE_NOAUTH"] = "true"
        self.api = self.procs.start(
            "placement-api", "placement-api", "--host", host, "--port", str(port)
        )
        processes.wait_http(f"http://127.0.0.1:{port}/", self.api)
        return port

    def start_services(self, args, broker_url, port, netns=None):
        self.cf = _conf(
            self.workdir / "services.conf",
            broker_url("127.0.0.1"),
            f"http://127.0.0.1:{port}",
            self.state_dir,
            args.failure_rate,
        )
        started = [
            self.procs.start(f"scheduler-{n}", "scheduler-worker", *self.cf)
            for n in range(args.schedulers)
        ]
        started += [
            self.procs.start(f"super-{n}", "conductor-worker", *self.cf) for n in range(args.supers)
        ]
        started += [
            self.procs.start(f"{cell}-{n}", "conductor-worker", *self.cf, "--cell", cell)
            for cell in CELLS
            for n in range(args.cell_conductors)
        ]
        if netns is not None:
            addr = netns.root_addr
            ns_cf = _conf(
                self.workdir / "netns.conf",
                broker_url(addr),
                f"http://{addr}:{port}",
                self.state_dir,
                args.failure_rate,
            )
            cmd = netns.command("conductor-worker", *ns_cf, "--cell", "cell1")
            started.append(self.procs.start("cell1-netns", *cmd))
        for proc in started:
            processes.wait_ready(self.workdir, proc, timeout=300)

    def api_pids(self):
        """placement-api's master and its workers."""
        out = subprocess.run(
            ["pgrep", "-P", str(self.api.pid)], capture_output=True, text=True
        ).stdout
        return [self.api.pid, *(int(p) for p in out.split())]


def _pause_placement(dep, seconds):
    # The master first, so that it forks no new worker meanwhile.
    pids = dep.api_pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    return len(pids)


def inject(fault, infra, dep, seconds):
    """Inject ``fault`` for ``seconds``; what was done, as printed."""
    if fault == "rabbitmq":
        infra["broker"].restart(seconds)
        return f"broker application stopped for {seconds} s, then started"
    if fault == "postgresql":
        infra["pg"].stop("fast")
        time.sleep(seconds)
        infra["pg"].start()
        return f"PostgreSQL stopped (fast) for {seconds} s, then started"
    if fault == "placement-stall":
        count = _pause_placement(dep, seconds)
        return f"placement-api's {count} processes SIGSTOPped for {seconds} s, then SIGCONTed"
    if fault == "netcut":
        infra["netns"].cut()
        try:
            time.sleep(seconds)
        finally:
            infra["netns"].mend()
        return f"the namespace conductor's link down for {seconds} s, then up"
    return "no fault"


def _answers_so_far(path):
    # Outcome and refusal lines carry a status; the summary does not.
    with open(path) as f:
        return f.read().count('"status"')


class Injector(threading.Thread):
    """The fault, beside build-submit (whose outcomes keep being timed)."""

    def __init__(self, fault, infra, dep, seconds):
        super().__init__(daemon=True)
        self.args = (fault, infra, dep, seconds)
        self.done = self.ended = self.at = None  # at: (answers in, seconds) when started

    def run(self):
        try:
            self.done = inject(*self.args)
        except Exception as exc:  # noqa: BLE001 - reported in the run's line
            self.done = f"INJECTION FAILED: {exc!r}"
        finally:
            self.ended = time.monotonic()


def _follow(proc, out_path, start, injector, third):
    """Until build-submit exits; the time of its last answer."""
    count, last = 0, start
    while proc.poll() is None:
        seen = _answers_so_far(out_path)
        if seen != count:
            count, last = seen, time.monotonic()
        if injector is not None and injector.at is None and seen >= third:
            injector.at = (seen, time.monotonic() - start)
            injector.start()
        time.sleep(0.2)
    if _answers_so_far(out_path) != count:
        last = time.monotonic()
    return last


def submit(dep, specs_path, fault, infra, args):
    """Run build-submit, the fault injected once a third of the outcomes
    are in. (exit status, JSON lines, {timings}, what the fault did)."""
    out_path = dep.workdir / "submit.out"
    seconds = args.fault_seconds or DOWN_SECONDS.get(fault, 0)
    injector = None if fault == "none" else Injector(fault, infra, dep, seconds)
    command = [os.path.join(BIN, "build-submit"), *dep.cf, "--requests", str(specs_path)]
    command += ["--json", "--timeout", str(BUILD_SUBMIT_TIMEOUT), *args.submit_args]
    start = time.monotonic()
    with open(out_path, "w") as out, open(dep.workdir / "submit.err", "w") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=dep.procs.env)
        last = _follow(proc, out_path, start, injector, args.instances // 3)
        rc = proc.wait()
    exited = time.monotonic()
    lines = [json.loads(x) for x in out_path.read_text().splitlines() if x.strip()]
    return rc, lines, {"last": last - start, "exit": exited - last}, _fault_text(injector, last)


def _fault_text(injector, last):
    if injector is None:
        return "no fault"
    if injector.at is None:
        return "NOT INJECTED: build-submit finished before a third of the outcomes"
    injector.join()
    (seen, at), after = injector.at, last - injector.ended
    tail = (
        f"the last answer {after:.0f} s after the fault ended"
        if after >= 0
        else f"every answer in {-after:.0f} s before the fault ended"
    )
    return f"{injector.done} ({seen} answers in, {at:.0f} s after the start); {tail}"


COUNTERS = (
    "lost",
    "answered twice",
    "leaked allocations",
    "missing allocations",
    "double builds",
    "refused holding allocations",
    "records disagreeing",
    "over-committed",
)


def answers_of(lines, requests):
    """{instance: [(status, host, reason), ...]} of build-submit's lines: an
    outcome per instance, a refusal for every instance of its request."""
    answers = {i: [] for instances in requests.values() for i in instances}
    for line in lines:
        status = line.get("status")
        if status in ("placed", "failed") and "instance_uuid" in line:
            got = (status, line.get("host_uuid"), line.get("reason"))
            answers.setdefault(line["instance_uuid"], []).append(got)
        elif status in ("refused", "invalid"):
            for instance in requests.get(line.get("request_id"), ()):
                answers[instance].append((status, None, line.get("error")))
    return answers


def _audit_placed(c, host, held, record, runs):
    if held.get(host) != RESOURCES:
        c["missing allocations"] += 1
    if set(held) - {host}:
        c["leaked allocations"] += 1
    if runs is None:
        c["lost"] += 1  # told placed, runs nowhere
    elif runs != host:
        c["double builds"] += 1
    if record is None or record.status != "placed" or record.host_uuid != host:
        c["records disagreeing"] += 1


def _audit_instance(c, got, held, record, runs):
    """Count what is wrong with one instance into ``c``."""
    if not got:
        c["lost"] += 1
    elif len(got) > 1:
        c["answered twice"] += 1
        if sum(1 for status, *_rest in got if status == "placed") > 1:
            c["double builds"] += 1
    status, host, reason = got[0] if got else (None, None, None)
    if status == "placed":
        _audit_placed(c, host, held, record, runs)
        return
    if held:
        c["leaked allocations"] += 1
        if status == "refused":
            c["refused holding allocations"] += 1
    if runs is not None:
        c["double builds"] += 1  # runs, though the answer says it does not
    if status == "failed" and (record is None or record.status != "failed" or not reason):
        c["records disagreeing"] += 1
    if status == "refused" and record is not None and record.status != "failed":
        c["records disagreeing"] += 1


def audit(dep, answers):
    """The counters of COUNTERS, read from placement's database and the
    hypervisors' state, and ``placement-manage allocations audit``'s exit."""
    db = db_mod.Database(dep.db_url)
    try:
        allocs, records, over = bus.ledger(db)
    finally:
        db.dispose()
    running = processes.running_instances(dep.state_dir)
    c = dict.fromkeys(COUNTERS, 0)
    for instance, got in answers.items():
        _audit_instance(
            c, got, allocs.get(instance, {}), records.get(instance), running.get(instance)
        )
    # Consumers and records of instances nobody asked for.
    c["leaked allocations"] += len(set(allocs) - set(answers))
    c["records disagreeing"] += len(set(records) - set(answers))
    c["double builds"] += len(set(running) - set(answers))
    c["over-committed"] = len(over)
    result = processes.manage(dep.db_url, "allocations", "audit", env=dep.procs.env)
    c["allocations audit exit"] = result.returncode
    return c


def _service_env(db_url):
    # The caller's OS_* settings would hide the services' shipped defaults.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_PLACEMENT_DATABASE__CONNECTION"] = db_url
    return env


def _prepare(fault, infra, workdir):
    """A fresh database with the inventory, a vhost; (Deployment, vhost)."""
    pg = infra["pg"]
    name = f"faults_{fault.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    pg.createdb(name)
    db_url = sa.engine.make_url(pg.url).set(database=name).render_as_string(False)
    dep = Deployment(workdir, _service_env(db_url), db_url)
    for cmd in (["db", "sync"], ["inventory", "load", infra["inventory"], "--cells", "2"]):
        res = processes.manage(db_url, *cmd, env=dep.procs.env)
        if res.returncode != 0:
            raise RuntimeError(f"placement-manage {' '.join(cmd)}: {res.stderr[-2000:]}")
    vhost = f"faults-{fault}-{uuid.uuid4().hex[:8]}"
    infra["broker"].add_vhost(vhost)
    return dep, vhost


def run_fault(fault, args, infra):
    """One run with ``fault``; (ok, summary line)."""
    workdir = infra["workdir"] / fault
    workdir.mkdir()
    dep, vhost = _prepare(fault, infra, workdir)
    try:
        port = dep.start_api(fault)
        netns = infra.get("netns") if fault == "netcut" else None
        dep.start_services(args, lambda host: infra["broker"].url(host, vhost), port, netns)
        requests = _specs(workdir / "specs.jsonl", args, fault)
        rc, lines, times, done = submit(dep, workdir / "specs.jsonl", fault, infra, args)
        counts = audit(dep, answers_of(lines, requests))
    finally:
        dep.procs.stop_all()
    summary = lines[-1] if lines and "instances" in lines[-1] else {}
    # A fault that never came (the run was over first) proves nothing.
    injected = not done.startswith(("NOT INJECTED", "INJECTION FAILED"))
    ok = injected and rc == 0 and summary.get("unanswered") == 0 and not any(counts.values())
    return ok, _line(fault, ok, rc, summary, counts, times, done) + _refusals(lines)


def _refusals(lines):
    """The refusals' errors and how often each was given, as printed."""
    errors = collections.Counter(
        str(line.get("error"))[:200] for line in lines if line.get("status") == "refused"
    )
    return "".join(f"\n    refused {n} x: {error}" for error, n in errors.most_common(5))


def _line(fault, ok, rc, summary, counts, times, done):
    survived = "-" if fault == "none" else f"{1 if ok else 0}/1"
    figures = ", ".join(f"{k} {v}" for k, v in counts.items())
    answered = (summary.get("placed") or 0) + (summary.get("failed") or 0)
    return (
        f"{fault}: {'OK' if ok else 'FAILED'}; faults survived {survived}; "
        f"{summary.get('instances')} instances: {summary.get('placed')} placed, "
        f"{summary.get('failed')} failed, {summary.get('refused')} requests refused, "
        f"{summary.get('unanswered')} unanswered, {summary.get('rescheduled')} rescheduled; "
        f"{figures}; {answered / max(times['last'], 1e-9):.1f} instances/s to the last answer "
        f"({times['last']:.0f} s); build-submit exit {rc}, {times['exit']:.0f} s after its last "
        f"answer (its own figure {summary.get('instances_per_second')}/s); fault: {done}"
    )


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fault", choices=("none", *FAULTS, "all"), default="all")
    p.add_argument("--instances", type=int, default=2000)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--inventory", help="41 or 5k (shipped), N identical nodes, or a YAML file")
    where.add_argument("--nodes", type=int, default=100, help="N identical nodes (default 100)")
    p.add_argument("--per-request", type=int, default=1, help="instances per request spec")
    p.add_argument("--schedulers", type=int, default=2)
    p.add_argument("--supers", type=int, default=2)
    p.add_argument("--cell-conductors", type=int, default=1, help="conductors per cell")
    p.add_argument(
        "--requests-per-message", type=int, default=None, help="build-submit's; its default"
    )
    p.add_argument(
        "--failure-rate",
        type=float,
        default=None,
        help="[conductor] simulated_failure_rate (shipped: 0, no build fails)",
    )
    p.add_argument("--fault-seconds", type=float, default=None, help="the fault's duration")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = p.parse_args(argv)
    if args.instances < args.per_request or args.instances % args.per_request:
        p.error("--instances is a multiple of --per-request")
    args.submit_args = (
        ["--requests-per-message", str(args.requests_per_message)]
        if args.requests_per_message
        else []
    )
    return args


def _header(args, faults):
    print(
        f"build_faults: {', '.join(faults)}; {args.instances} instances, {args.per_request} "
        f"per request; {args.schedulers} scheduler workers, {args.supers} super conductors, "
        f"{args.cell_conductors} conductor(s) per cell; placement on PostgreSQL"
    )
    print("Overridden (everything else is the services' shipped defaults):")
    base = override_lines("none")
    for line in base:
        print(f"  {line}")
    if args.failure_rate is not None:
        print(f"  conductors: [conductor] simulated_failure_rate = {args.failure_rate}")
    if "netcut" in faults:
        for line in override_lines("netcut")[len(base) :]:
            print(f"  netcut run only: {line}")
    print(flush=True)


def _infrastructure(infra, faults, inventory):
    """Fill ``infra`` as each piece starts, so that a failure half way
    tears down what started."""
    pg = private_postgres.PrivatePostgres({"max_connections": "200"})
    infra["pg"] = pg
    pg.init().start()
    infra["broker"] = PrivateBroker(infra["workdir"])
    infra["broker"].start()
    if "netcut" in faults:
        infra["netns"] = Namespace()
        infra["netns"].create()
    label, path, size, _gpu = bus_throughput._inventory(inventory, str(infra["workdir"]))
    infra["inventory"], infra["label"] = path, f"{label} ({size} hosts)"


def _teardown(infra):
    for key in ("netns", "broker", "pg"):
        if key in infra:
            try:
                infra[key].destroy()
            except Exception as exc:  # noqa: BLE001 - the others go anyway
                print(f"build_faults: tearing down {key}: {exc}", file=sys.stderr)


def _machine():
    """Where and when: host, CPUs, load, commit, date."""
    head = subprocess.run(["git", "log", "-1", "--format=%h"], capture_output=True, text=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"{platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"commit {head.stdout.strip() or 'unknown (not a git checkout)'}, {when}"
    )


def main(argv=None):
    args = _parse(argv)
    faults = FAULTS if args.fault == "all" else (args.fault,)
    _header(args, faults)
    workdir = Path(tempfile.mkdtemp(prefix="build-faults-"))
    infra, lines, failed = {"workdir": workdir}, [], True  # until every run is through
    try:
        _infrastructure(infra, faults, args.inventory or str(args.nodes))
        oks = []
        for fault in faults:
            ok, line = run_fault(fault, args, infra)
            oks.append(ok)
            lines.append(line)
            print(line, flush=True)
        failed = not all(oks)
    finally:
        _teardown(infra)
        if failed or args.keep:
            print(f"build_faults: logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{_machine()}, inventory {infra.get('label')}")
    for line in lines:
        print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
