"""``placement-demo``: the whole system in one process, for a first look.

Starts placement in-process on the embedded default (a temporary SQLite file,
removed at exit, so every run starts clean; ``--database URL`` keeps one),
loads a heterogeneous inventory (the 41-node one by default), runs the power
controller once, then schedules and builds a stream of mixed performance and
standard requests through the scheduler and conductor services, which
talk over oslo.messaging's in-memory transport (the code path of the real
processes on RabbitMQ) and to placement over REST, with injected build
failures. Prints a summary table; with
``--json`` the last line is the summary as one JSON object.

    placement-demo --requests 200 --seed 1 --failure-rate 0.05 --json
"""

import collections
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time

import werkzeug.serving

import powerpolicy
from conductor import cmd as conductor_cmd
from conductor import conf as cconf_mod
from conductor import submit as submit_mod
from joule import config
from joule import inventory as inventory_mod
from joule import placement_client
from joule import request_spec as spec_mod
from joule import rpc
from joule import vocabulary
from joule.placement_client import url_path
from placement import app as app_mod
from placement import conf as pconf_mod
from powerpolicy import conf as power_conf
from powerpolicy import controller as power_controller
from scheduler import cmd as scheduler_cmd
from scheduler import conf as sconf_mod

DEFAULT_INVENTORY = os.path.join(
    os.path.dirname(powerpolicy.__file__), "data", "cluster-nodes-41.yaml"
)
CELLS = 2
PLACED = "placed"
FAILED = "failed"
PROG = "placement-demo"


def _parser():
    p = config.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=200, help="requests to schedule (200)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the request mix and the injected failures (0)"
    )
    p.add_argument(
        "--failure-rate",
        type=float,
        default=0.05,
        help="probability that a build fails on its host (0.05)",
    )
    p.add_argument(
        "--performance-share",
        type=float,
        default=0.3,
        help="share of performance requests in the stream (0.3)",
    )
    p.add_argument(
        "--inventory",
        default=DEFAULT_INVENTORY,
        help="cluster inventory in the YAML format of powerpolicy/data/*.yaml "
        "(joule/inventory.py; default: the shipped 41-node inventory)",
    )
    p.add_argument(
        "--database",
        default=None,
        help="SQLAlchemy URL of the placement database (default: a temporary "
        "SQLite file, removed at exit)",
    )
    p.add_argument(
        "--static-hp-frac",
        type=float,
        default=0.5,
        help="power controller: share of every family kept in performance (0.5)",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        help="hosts per instance: selected plus alternates (3)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the summary as one JSON object on the last line"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


class _Server:
    """Placement served over HTTP on 127.0.0.1 in a background thread."""

    def __init__(self, app):
        self._srv = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._srv.server_port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()

    def stop(self):
        self._srv.shutdown()
        self._thread.join(timeout=10)


def load_inventory(client, nodes):
    """Providers, inventories, node records and hardware for ``nodes`` over REST."""
    out = []
    for index, node in enumerate(nodes):
        hw = node.hardware
        resp = client.request("POST", url_path("resource_providers"), json={"name": node.name})
        uuid = resp.json()["uuid"]
        inventories = {
            "VCPU": {"total": hw.get("cpu_cores") or 1},
            "MEMORY_MB": {"total": (hw.get("memory_gib") or 1) * 1024},
        }
        if hw.get("gpu_count"):
            inventories["PGPU"] = {"total": hw["gpu_count"]}
        client.request(
            "PUT",
            url_path("resource_providers", uuid, "inventories"),
            json={"resource_provider_generation": 0, "inventories": inventories},
        )
        # Cells alternate so that alternates (same cell only) are a real constraint.
        cell = f"cell{index % CELLS + 1}"
        client.put_node(
            uuid, cell=cell, labels={"joulie.io/managed": "true", "family": node.family}
        )
        client.put_hardware(uuid, hw)
        out.append((uuid, node))
    return out


def make_request(rng, performance_share):
    """One request of the demo's mix: performance work often wants a GPU."""
    if rng.random() < performance_share:
        resources = {"VCPU": rng.choice((8, 16, 32)), "MEMORY_MB": rng.choice((32768, 65536))}
        if rng.random() < 0.6:
            resources["PGPU"] = rng.choice((1, 2))
        wc = vocabulary.PERFORMANCE
    else:
        resources = {"VCPU": rng.choice((2, 4, 8)), "MEMORY_MB": rng.choice((4096, 8192, 16384))}
        wc = vocabulary.STANDARD
    return {
        "version": spec_mod.REQUEST_SPEC_VERSION,
        "resources": resources,
        "workload_class": wc,
        "project_id": "demo",
        "user_id": "demo",
    }


def _progress(done, total, counts, enabled):
    """A bar redrawn in place on a terminal; on a pipe, one line per tenth."""
    if not enabled or not total:
        return
    line = (
        f"[{'#' * (30 * done // total)}{'.' * (30 - 30 * done // total)}] "
        f"{done}/{total} placed {counts['placed']} failed {counts['failed']}"
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line + ("\n" if done == total else ""))
    elif done == total or done % max(1, total // 10) == 0:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run(args, log=print):
    """Run the demo; return the summary dict."""
    nodes = inventory_mod.load(args.inventory)
    tmpdir = None
    url = args.database
    if url is None:
        tmpdir = tempfile.mkdtemp(prefix="placement-demo-")
        url = f"sqlite:///{os.path.join(tmpdir, 'placement.sqlite')}"
        log(
            f"placement: embedded SQLite at {url[10:]} (temporary, removed at exit, so "
            "every run starts clean; --database URL keeps one)",
            file=sys.stderr,
        )
    server = None
    try:
        pconf = pconf_mod.make_conf(
            overrides={
                ("placement_database", "connection"): url,
                ("api", "auth_strategy"): "noauth2",
            }
        )
        app = app_mod.create_app(pconf, sync=True)
        server = _Server(app)
        sconf = sconf_mod.make_conf(
            overrides={
                ("placement", "endpoint_override"): server.url,
                ("scheduler", "max_attempts"): args.max_attempts,
            }
        )
        client = placement_client.PlacementClient.from_conf(sconf, sconf_mod.LEGACY_CLIENT_GROUP)
        hosts = load_inventory(client, nodes)
        log(
            f"loaded {len(hosts)} nodes from {args.inventory} into placement at {server.url}",
            file=sys.stderr,
        )

        pc = power_conf.make_conf(overrides={"static_hp_frac": args.static_hp_frac})
        # The power controller reads and writes the same placement: one client.
        tick = power_controller.Controller(pc, client).tick()
        log(
            f"power controller: policy {tick.policy}, {tick.hp_count} of {len(hosts)} nodes "
            "in performance",
            file=sys.stderr,
        )

        # The services of a deployment (scheduler, super conductor, one
        # conductor per cell) over oslo.messaging's in-memory transport: the
        # code path of the real processes on RabbitMQ, in this process.
        conf = cconf_mod.make_conf(
            overrides={
                ("placement", "endpoint_override"): server.url,
                ("scheduler", "max_attempts"): args.max_attempts,
                (None, "transport_url"): rpc.IN_MEMORY_TRANSPORT_URL,
                ("conductor", "simulated_failure_rate"): args.failure_rate,
                ("conductor", "simulated_seed"): args.seed,
            }
        )
        transport = rpc.transport_of(conf)
        driver = conductor_cmd.make_driver(conf)
        services = [scheduler_cmd.build_service(conf, transport, "scheduler")]
        services.append(
            conductor_cmd.build_service(conf, transport, None, "conductor", driver=driver)
        )
        services += [
            conductor_cmd.build_service(
                conf, transport, f"cell{n + 1}", f"conductor.cell{n + 1}", driver=driver
            )
            for n in range(CELLS)
        ]
        for svc in services:
            svc.start()
        try:
            rng = random.Random(args.seed)
            lines = []
            for n in range(args.requests):
                spec = make_request(rng, args.performance_share)
                spec["request_id"] = f"req-demo-{args.seed}-{n}"
                lines.append(json.dumps(spec))
            counts = collections.Counter()
            show = not args.no_progress

            def emit(line):
                if line.get("status") in (PLACED, FAILED):
                    counts[line["status"]] += 1
                    _progress(counts[PLACED] + counts[FAILED], total, counts, show)

            submitter = submit_mod.Submitter(conf, transport, client, emit)
            requests = submitter.parse(lines)
            total = submitter.counts["instances"]
            start = time.perf_counter()
            sub_counts = submitter.run(requests)
            elapsed = time.perf_counter() - start
        finally:
            for svc in services:
                svc.stop()
            transport.cleanup()
        counts["rescheduled"] = sub_counts["rescheduled"]
        races = services[0].endpoint.races_lost()
        return _summary(args, client, hosts, submitter.results, counts, races, elapsed)
    finally:
        if server is not None:
            server.stop()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _summary(args, client, hosts, results, counts, races_lost, elapsed):
    # The ledger's view, not the scheduler's: the twins as stored now.
    nodes = {n["uuid"]: n for n in client.list_nodes()}  # every page
    family_of = {uuid: node.family for uuid, node in hosts}
    families = {}
    for uuid, fam in family_of.items():
        entry = families.setdefault(
            fam, {"nodes": 0, "performance_nodes": 0, "performance_placed": 0, "standard_placed": 0}
        )
        entry["nodes"] += 1
        twin = nodes[uuid].get("twin") or {}
        if twin.get("schedulable_class") == vocabulary.PERFORMANCE:
            entry["performance_nodes"] += 1
    perf_on_eco = 0
    for res in results:
        if res["status"] != PLACED:
            continue
        families[family_of[res["host_uuid"]]][f"{res['workload_class']}_placed"] += 1
        twin = nodes[res["host_uuid"]].get("twin") or {}
        blocked = twin.get("schedulable_class") in vocabulary.BLOCKED_FOR_PERFORMANCE
        if res["workload_class"] == vocabulary.PERFORMANCE and blocked:
            perf_on_eco += 1
    return {
        "requests": args.requests,
        "instances": len(results),
        "placed": counts[PLACED],
        "failed": counts[FAILED],
        "rescheduled": counts["rescheduled"],
        "races_lost": races_lost,
        "performance_on_eco": perf_on_eco,
        "performance_requests": sum(r["workload_class"] == vocabulary.PERFORMANCE for r in results),
        "seconds": round(elapsed, 3),
        "requests_per_second": round(args.requests / elapsed, 1) if elapsed else None,
        "seed": args.seed,
        "failure_rate": args.failure_rate,
        "families": dict(sorted(families.items())),
    }


def format_table(summary):
    lines = [
        f"{'requests':<28}{summary['requests']:>8}",
        f"{'placed':<28}{summary['placed']:>8}",
        f"{'failed':<28}{summary['failed']:>8}",
        f"{'rescheduled (to alternate)':<28}{summary['rescheduled']:>8}",
        f"{'races lost':<28}{summary['races_lost']:>8}",
        f"{'performance on eco/draining':<28}{summary['performance_on_eco']:>8}",
        f"{'requests per second':<28}{summary['requests_per_second']:>8}",
        "",
        f"{'family':<40}{'nodes':>6}{'perf':>6}{'perf placed':>13}{'std placed':>12}",
    ]
    for fam, e in summary["families"].items():
        lines.append(
            f"{fam[:39]:<40}{e['nodes']:>6}{e['performance_nodes']:>6}"
            f"{e['performance_placed']:>13}{e['standard_placed']:>12}"
        )
    return "\n".join(lines)


def main(argv=None):
    try:
        # The demo's own options here; --version and oslo.log's (--debug,
        # --log-file ...) through the shared start-up.
        args, rest = _parser().parse_known_args(argv)
        config.load(PROG, "placement-demo", lambda conf: None, argv=rest, default_config_files=[])
    except config.ConfigError as exc:
        return config.fail(PROG, exc)
    if (
        args.requests < 0
        or not 0.0 <= args.failure_rate <= 1.0
        or not 0.0 <= args.performance_share <= 1.0
    ):
        return config.fail(
            PROG, "--requests must be >= 0 and --failure-rate / --performance-share within [0, 1]"
        )
    # The demo's output is the table: only warnings and errors are logged
    # unless --debug, and werkzeug's line per request never.
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        summary = run(args)
    except Exception as exc:  # one clear line, not a traceback, for a first run
        if isinstance(
            exc, (inventory_mod.InventoryError, placement_client.PlacementError, OSError)
        ):
            return config.fail(PROG, exc)
        raise
    print(format_table(summary))
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    return 0 if summary["performance_on_eco"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
