"""``python -m scheduler.batch``: schedule request specs read as JSON lines.

A developer and benchmark tool, not a service (``scheduler-worker`` is the
service, on the bus): it drives one Scheduler directly against placement,
which is what the claim-race tests and benchmarks/schedule.py measure.

Each input line is one request spec (the ``request_spec`` message of
joule.request_spec, documented in docs/architecture.md); each output line is
its outcome: ``{"line", "request_id", "status": "placed"|"failed"|"invalid",
"error"}``, and for a placed request the ``selections`` message's fields
(``version``, ``selections``: [[selected, *alternates], ...]). A bad line is
answered with one "invalid" line and the worker reads on; nothing is claimed
or recorded for it. A summary goes to stderr at the end. Several workers may
run at once against one placement: claims are atomic there, lost races are
retried here.

    python -m scheduler.batch --config-file etc/scheduler/scheduler.conf --requests specs.jsonl
"""

import json
import logging
import sys

from oslo_config import cfg

from joule import config
from joule import placement_client
from joule import request_spec as spec_mod
from joule import startup
from scheduler import cli
from scheduler import conf as conf_mod
from scheduler import worker as worker_mod

LOG = logging.getLogger("scheduler-worker")
PROG = "scheduler-batch"

cli_opts = [
    cfg.StrOpt(
        "requests",
        default="-",
        positional=False,
        help="File of request specs, one JSON object per line; - for stdin.",
    ),
    cfg.StrOpt("output", default="-", help="Where outcomes go, one JSON line each; - for stdout."),
]


def run(conf, lines, out, client=None):
    """Schedule every spec of ``lines``; write outcomes to ``out``; return stats."""
    client = client or placement_client.PlacementClient.from_conf(
        conf, conf_mod.LEGACY_CLIENT_GROUP
    )
    sched = worker_mod.Scheduler(conf, client)
    counts = {"requests": 0, "placed": 0, "failed": 0, "invalid": 0}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        counts["requests"] += 1
        outcome = {"line": number}
        try:
            spec = spec_mod.load_request_spec(json.loads(line))
            outcome["request_id"] = spec.request_id  # generated when the line has none
            selections = sched.select_destinations(spec)
        except json.JSONDecodeError as exc:
            counts["invalid"] += 1
            outcome.update(status="invalid", error=f"line {number} is not JSON: {exc}")
        except spec_mod.InvalidRequestSpec as exc:
            counts["invalid"] += 1
            outcome.update(status="invalid", error=f"line {number}: {exc}")
        except worker_mod.PlacementUnavailable as exc:
            # No point reading on: every later request would fail the same way.
            counts["failed"] += 1
            outcome.update(status="failed", error=str(exc))
            out.write(json.dumps(outcome) + "\n")
            out.flush()
            raise
        except worker_mod.SchedulerError as exc:
            counts["failed"] += 1
            outcome.update(status="failed", error=str(exc))
        else:
            counts["placed"] += 1
            outcome.update(status="placed", **spec_mod.dump_selections(spec.request_id, selections))
        out.write(json.dumps(outcome) + "\n")
    out.flush()
    counts["races_lost"] = sched.stats["races_lost"]
    return counts


def main(argv=None):
    return startup.run(
        PROG, lambda: _schedule(argv), unavailable=(worker_mod.PlacementUnavailable,)
    )


def _schedule(argv):
    conf = cli.load_conf(argv, PROG, "scheduler", conf_mod.register_opts, cli_opts)
    try:
        client = placement_client.PlacementClient.from_conf(conf, conf_mod.LEGACY_CLIENT_GROUP)
        cli.check_placement(client)
        with cli.open_stream(conf.requests, "r") as src, cli.open_stream(conf.output, "w") as out:
            counts = run(conf, src, out, client=client)
    except OSError as exc:
        raise config.ConfigError(str(exc)) from None
    print(json.dumps(counts), file=sys.stderr)
    return 0 if counts["failed"] == 0 and counts["invalid"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
