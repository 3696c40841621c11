"""``conductor-worker``: build the request specs read as JSON lines.

Pending build requests left by a previous conductor are resumed first
(``[conductor] resume_pending``). Each input line is a request spec; each
output line is one instance's outcome. A summary goes to stderr.

    conductor-worker --config-file etc/scheduler/conductor.conf --requests specs.jsonl
"""

import json
import sys

from oslo_config import cfg

from joule import config
from joule import placement_client

from conductor import conf as conf_mod
from conductor import driver as driver_mod
from conductor import manager
from joule import request_spec as spec_mod
from scheduler import cli
from scheduler import conf as sconf
from scheduler import worker as worker_mod

cli_opts = [
    cfg.StrOpt("requests", default=None,
               help="File of request specs, one JSON object per line; - for stdin. "
               "Without it, only pending build requests are resumed."),
    cfg.StrOpt("output", default="-", help="Where outcomes go, one JSON line each."),
]


def make_conductor(conf, client=None):
    client = client or placement_client.PlacementClient.from_conf(
        conf, sconf.LEGACY_CLIENT_GROUP)
    c = conf.conductor
    driver = driver_mod.SimulatedDriver(c.simulated_failure_rate, c.simulated_failing_hosts,
                                        c.simulated_seed)
    return manager.Conductor(worker_mod.Scheduler(conf, client), client, driver)


def _build_all(conf, cond, out, counts):
    """Resume the pending build requests, then build each spec of --requests."""

    def emit(results):
        for res in results:
            counts["instances"] += 1
            counts[res.status] = counts.get(res.status, 0) + 1
            counts["rescheduled"] += res.rescheduled
            out.write(json.dumps(spec_mod.dump_build_result(res)) + "\n")

    if conf.conductor.resume_pending:
        emit(cond.resume_pending())
    if not conf.requests:
        return
    with cli.open_stream(conf.requests, "r") as src:
        for number, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                emit(cond.build(json.loads(line)))
            except (ValueError, spec_mod.InvalidRequestSpec) as exc:
                # JSONDecodeError is a ValueError; say which line. Nothing was
                # recorded: the spec is loaded before any build request is.
                counts["invalid"] += 1
                out.write(json.dumps({"line": number, "status": "invalid",
                                      "error": f"line {number}: {exc}"}) + "\n")


def main(argv=None):
    prog = "conductor-worker"
    try:
        conf = cli.load_conf(argv, prog, "conductor", conf_mod.register_opts, cli_opts)
    except config.ConfigError as exc:
        return config.fail(prog, exc)
    cond = make_conductor(conf)
    counts = {"instances": 0, "placed": 0, "failed": 0, "invalid": 0, "rescheduled": 0}
    try:
        cli.check_placement(cond.client)
        with cli.open_stream(conf.output, "w") as out:
            try:
                _build_all(conf, cond, out, counts)
            finally:
                out.flush()
    except OSError as exc:
        return config.fail(prog, exc)
    except (worker_mod.PlacementUnavailable, placement_client.PlacementUnreachable,
            placement_client.AuthenticationFailed) as exc:
        return config.fail(prog, f"{exc}; pending build requests are resumed on the next "
                           "start", config.EXIT_UNAVAILABLE)
    counts["races_lost"] = cond.scheduler.stats["races_lost"]
    print(json.dumps(counts), file=sys.stderr)
    return 0 if counts["failed"] == 0 and counts["invalid"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
