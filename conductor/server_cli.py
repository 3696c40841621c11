"""``joule-server``: the instances, as an operator or a user drives them.

    joule-server --config-file etc/scheduler/conductor.conf list [--status placed] [-f json]
    joule-server --config-file etc/scheduler/conductor.conf show INSTANCE_UUID
    joule-server --config-file etc/scheduler/conductor.conf delete INSTANCE_UUID [--grace 10]

In the style of the OpenStack client's ``server`` commands (``build-submit``
stays the way to send streams of specs). An instance's state is read from
placement's build request and, for a placed one, from how its node agent
reported it ended:

* ``building`` (pending: being scheduled or built), ``failed`` (no host
  could build it, with why);
* ``running`` (placed, no end reported), or ``unknown`` when its host's
  agent has not reported for longer than ``[scheduler] service_down_time``:
  what runs there cannot be told, so it is never taken for finished;
* ``finished`` (exit 0), ``errored`` (an exit status, or killed by its
  memory limit, said as such), ``deleted``, ``lost``.

``delete`` asks the instance's host's agent (``compute.<host>``) to end it
(SIGTERM, then SIGKILL after ``--grace`` seconds, the agent's
``[agent] delete_grace`` by default) and waits until its end is recorded
and its claim released (the agent reports it to the cell's conductors).
Exit status 0, 1 when the instance is unknown or the delete did not
complete, 2 for a bad command line or configuration, 3 when placement or
the bus cannot be reached.
"""

import json
import sys
import time

from conductor import conf as conf_mod
from joule import config
from joule import placement_client as client_mod
from joule import rpc
from joule import startup
from scheduler import conf as sconf

PROG = "joule-server"
COLUMNS = ("instance_uuid", "request_id", "state", "host", "exit_status", "reason")
# Seconds an agent's delete is waited for, beyond its grace; without
# --grace, beyond this bound on the agents' [agent] delete_grace.
DELETE_SLACK = 30.0
DEFAULT_GRACE_BOUND = 60.0


def _parser():
    parser = config.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    # oslo.config's own, named here so that they may come before the command.
    parser.add_argument("--config-file", action="append", default=[])
    parser.add_argument("--config-dir", action="append", default=[])
    parser.add_argument("-v", "--verbose", action="store_true", help="Log at DEBUG.")
    parser.add_argument("--version", action="version", version=config.version())
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="List instances.")
    listing.add_argument("--status", choices=("pending", "placed", "failed"))
    listing.add_argument("--request-id", help="Only the instances of this request.")
    show = sub.add_parser("show", help="Show one instance.")
    show.add_argument("instance_uuid")
    delete = sub.add_parser("delete", help="End an instance and release its claim.")
    delete.add_argument("instance_uuid")
    delete.add_argument(
        "--grace", type=float, help="Seconds between SIGTERM and SIGKILL (the agent's default)."
    )
    delete.add_argument(
        "--wait", type=float, default=60.0, help="Seconds to wait for the claim's release."
    )
    for p in (listing, show, delete):
        p.add_argument("-f", "--format", choices=("table", "json"), default="table")
    return parser


class Instances:
    """The instances as placement and the agents know them."""

    def __init__(self, client, down_time, compute=None):
        self.client = client
        self.down_time = down_time
        self.compute = compute
        self._hosts = None

    def hosts(self):
        """{host uuid: (name, whether its agent is down)}."""
        if self._hosts is None:
            self._hosts = {}
            for node in self.client.list_nodes():
                age = node.get("heartbeat_age_seconds")
                down = age is not None and age > self.down_time
                self._hosts[node["uuid"]] = (node.get("name") or node["uuid"], down)
        return self._hosts

    def view(self, record):
        """An instance's row from its build request."""
        host_uuid = record.get("host_uuid")
        # A host placement lists no node for (gone since) cannot be asked.
        name, down = self.hosts().get(host_uuid, (host_uuid, True)) if host_uuid else (None, False)
        status = record["status"]
        reason = record.get("reason")
        if status == "pending":
            state = "building"
        elif status == "failed":
            state = "failed"
        elif record.get("instance_state"):
            state, reason = record["instance_state"], record.get("state_reason")
        else:
            state = "unknown" if down else "running"
            if down:
                reason = (
                    f"the agent of {name} has not reported for over {self.down_time:g} s"
                    if name != host_uuid
                    else f"placement has no node {host_uuid}"
                )
        allocations = {}
        if status == "placed":
            allocations, _gen = self.client.get_allocations(record["instance_uuid"])
        return {
            "instance_uuid": record["instance_uuid"],
            "request_id": record["request_id"],
            "workload_class": record["workload_class"],
            "status": status,
            "state": state,
            "host": name,
            "host_uuid": host_uuid,
            "exit_status": record.get("exit_status"),
            "reason": reason,
            "claim": {rp: a["resources"] for rp, a in allocations.items()},
            "created_at": record.get("created_at"),
            "ended_at": record.get("state_updated_at"),
        }

    def list(self, status=None, request_id=None):
        filters = {k: v for k, v in (("status", status), ("request_id", request_id)) if v}
        return [self.view(r) for r in self.client.list_build_requests(**filters)]

    def show(self, instance_uuid):
        try:
            record = self.client.get_build_request(instance_uuid)
        except client_mod.PlacementError as exc:
            if exc.status == 404:
                return None
            raise
        return self.view(record)

    def delete(self, instance_uuid, grace, wait):
        """(exit status, message) of ending ``instance_uuid``."""
        row = self.show(instance_uuid)
        if row is None:
            return 1, f"no instance {instance_uuid}"
        if row["status"] != "placed":
            return 1, f"instance {instance_uuid} is {row['state']}: nothing runs to delete"
        if row["state"] not in ("running", "unknown"):
            return 0, f"instance {instance_uuid} has ended already ({row['state']})"
        # The agent's own grace (its [agent] delete_grace) is not known here.
        timeout = (grace if grace is not None else DEFAULT_GRACE_BOUND) + DELETE_SLACK
        try:
            answer = self.compute.delete_instance(row["host"], instance_uuid, timeout, grace=grace)
        except (rpc.Unanswered, rpc.AgentFailed) as exc:
            return 1, f"not deleted: {exc}"
        if answer is None:
            return 1, f"the agent of {row['host']} does not run {instance_uuid}"
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not self.client.get_allocations(instance_uuid)[0]:
                return 0, f"instance {instance_uuid} deleted; its claim is released"
            time.sleep(0.5)
        return (
            1,
            f"instance {instance_uuid} ended, but its claim was not released within {wait:g} s",
        )


def _print(rows, fmt, one=False):
    if fmt == "json":
        print(json.dumps(rows[0] if one else rows, indent=2, sort_keys=True))
        return
    if one:
        row = rows[0]
        width = max(len(k) for k in row)
        for key in sorted(row):
            print(f"{key:<{width}}  {row[key] if row[key] is not None else ''}")
        return
    table = [[str(r.get(c) if r.get(c) is not None else "") for c in COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(t[i]) for t in table]) for i, c in enumerate(COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)).rstrip())
    for t in table:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)).rstrip())


def main(argv=None):
    def body():
        try:
            return _run(argv)
        except client_mod.PlacementError as exc:
            if isinstance(exc, client_mod.NOT_THERE):
                raise
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1

    return startup.run(PROG, body, unavailable=(rpc.BusUnreachable,))


def _run(argv):
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    rest = [a for f in args.config_file for a in ("--config-file", f)]
    rest += [a for d in args.config_dir for a in ("--config-dir", d)]
    if args.verbose:
        rest.append("--debug")
    conf = config.load(
        PROG, "conductor", conf_mod.register_opts, argv=rest, default_config_files=[]
    )
    client = sconf.placement_client_of(conf)
    client.check()
    compute = None
    if args.command == "delete":
        rpc.check_reachable(conf)
        compute = rpc.ComputeAPI(conf, rpc.transport_of(conf))
    instances = Instances(client, conf.scheduler.service_down_time, compute)
    if args.command == "list":
        _print(instances.list(args.status, args.request_id), args.format)
        return 0
    if args.command == "show":
        row = instances.show(args.instance_uuid)
        if row is None:
            print(f"{PROG}: no instance {args.instance_uuid}", file=sys.stderr)
            return 1
        _print([row], args.format, one=True)
        return 0
    status, message = instances.delete(args.instance_uuid, args.grace, args.wait)
    print(message, file=sys.stdout if status == 0 else sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
