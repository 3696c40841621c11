"""``conductor-worker``: build the request specs read as JSON lines.

Pending build requests left by a previous conductor are resumed first
(``[conductor] resume_pending``). Each input line is a request spec; each
output line is one instance's outcome. A summary goes to stderr.

    conductor-worker --config-file etc/scheduler/conductor.conf --requests specs.jsonl
"""

import dataclasses
import json
import logging
import sys

from oslo_config import cfg

from conductor import conf as conf_mod
from conductor import driver as driver_mod
from conductor import manager
from scheduler import client as client_mod
from scheduler import filters as filters_mod
from scheduler import worker as worker_mod
from scheduler.request import InvalidRequestSpec

cli_opts = [
    cfg.StrOpt("requests", default=None,
               help="File of request specs, one JSON object per line; - for stdin. "
               "Without it, only pending build requests are resumed."),
    cfg.StrOpt("output", default="-", help="Where outcomes go, one JSON line each."),
    cfg.BoolOpt("debug", default=False, help="Log at DEBUG level."),
]


def make_conductor(conf, client=None):
    client = client or client_mod.PlacementClient.from_conf(conf)
    c = conf.conductor
    driver = driver_mod.SimulatedDriver(c.simulated_failure_rate, c.simulated_failing_hosts,
                                        c.simulated_seed)
    return manager.Conductor(worker_mod.Scheduler(conf, client), client, driver)


def main(argv=None):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf.register_cli_opts(cli_opts)
    try:
        conf(args=sys.argv[1:] if argv is None else argv, project="conductor",
             prog="conductor-worker", default_config_files=[])
        filters_mod.load(conf.filter_scheduler.enabled_filters)
    except (cfg.Error, filters_mod.UnknownFilter) as exc:
        print(f"conductor-worker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if conf.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    cond = make_conductor(conf)
    counts = {"instances": 0, "placed": 0, "failed": 0, "invalid": 0, "rescheduled": 0}
    out = sys.stdout if conf.output == "-" else open(conf.output, "w", encoding="utf-8")

    def emit(results):
        for res in results:
            counts["instances"] += 1
            counts[res.status] = counts.get(res.status, 0) + 1
            counts["rescheduled"] += res.rescheduled
            out.write(json.dumps(dataclasses.asdict(res)) + "\n")

    try:
        if conf.conductor.resume_pending:
            emit(cond.resume_pending())
        if conf.requests:
            src = sys.stdin if conf.requests == "-" else open(conf.requests, encoding="utf-8")
            with src:
                for number, line in enumerate(src, 1):
                    if not line.strip():
                        continue
                    try:
                        emit(cond.build(json.loads(line)))
                    except (ValueError, InvalidRequestSpec) as exc:
                        # JSONDecodeError is a ValueError; say which line.
                        counts["invalid"] += 1
                        out.write(json.dumps({"line": number, "status": "invalid",
                                              "error": f"line {number}: {exc}"}) + "\n")
    except OSError as exc:
        print(f"conductor-worker: {exc}", file=sys.stderr)
        return 2
    except client_mod.PlacementUnreachable as exc:
        print(f"conductor-worker: {exc}; pending build requests are resumed on the "
              "next start", file=sys.stderr)
        return 3
    finally:
        out.flush()
    counts["races_lost"] = cond.scheduler.stats["races_lost"]
    print(json.dumps(counts), file=sys.stderr)
    return 0 if counts["failed"] == 0 and counts["invalid"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
