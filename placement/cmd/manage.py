"""placement-manage: database administration.

    placement-manage db sync | db version
    placement-manage inventory load FILE [--cells N]
    placement-manage allocations audit [--delete]
    placement-manage build-requests purge --before TIME
    placement-manage scheduling-reports purge --before TIME

Every command but ``db ...`` refuses an empty or old schema with one line
naming ``placement-manage db sync``, exit status 2.
``... purge --before TIME`` (an ISO 8601 time, UTC unless it says
otherwise, or an age like ``7d``, ``12h``, ``30m``): finished build requests
(placed or failed; pending ones are never purged), or scheduling reports,
last written before that time are deleted, in batches.
``allocations audit`` exits like nova's ``placement audit``: 0 when nothing
was found, 3 when orphans were found (and left), 4 when they were deleted.
"""

import datetime
import re
import sys

from oslo_config import cfg

from joule import inventory as inventory_mod
from placement import db as db_mod
from placement import migration
from placement.cmd import common
from placement.objects import allocation_audit
from placement.objects import build_request as build_request_obj
from placement.objects import cluster_inventory
from placement.objects import scheduling_report as scheduling_report_obj

AUDIT_FOUND = 3
AUDIT_DELETED = 4


def _add_commands(subparsers):
    db = subparsers.add_parser("db", help="database commands")
    db_sub = db.add_subparsers(dest="db_command")
    db_sub.required = True
    db_sub.add_parser("sync", help="create or upgrade the schema (idempotent)")
    db_sub.add_parser("version", help="print the schema revision")

    inv = subparsers.add_parser("inventory", help="cluster inventory commands")
    inv_sub = inv.add_subparsers(dest="inventory_command")
    inv_sub.required = True
    load = inv_sub.add_parser(
        "load",
        help="load a cluster inventory file (the shared YAML format) into the "
        "database: root providers, inventories, node records, hardware; idempotent",
    )
    load.add_argument("file", help="the inventory YAML file")
    load.add_argument(
        "--cells", type=int, default=1, help="spread the nodes round-robin over cell1..cellN (1)"
    )

    alloc = subparsers.add_parser("allocations", help="allocation commands")
    alloc_sub = alloc.add_subparsers(dest="allocations_command")
    alloc_sub.required = True
    audit = alloc_sub.add_parser(
        "audit",
        help="list instance allocations whose build request is neither pending "
        "nor placed (orphans); exit 0 none, 3 found, 4 deleted",
    )
    audit.add_argument("--delete", action="store_true", help="delete the orphans found")
    audit.add_argument(
        "--verbose", action="store_true", help="also print each orphan's allocations"
    )

    for name, what in (
        ("build-requests", "finished (placed or failed) build requests"),
        ("scheduling-reports", "scheduling reports"),
    ):
        parser = subparsers.add_parser(name, help=f"{what}: purge")
        sub = parser.add_subparsers(dest=name.replace("-", "_") + "_command")
        sub.required = True
        purge = sub.add_parser("purge", help=f"delete {what} last written before a time")
        purge.add_argument(
            "--before",
            required=True,
            help="an ISO 8601 time (UTC unless it says otherwise), or an age: "
            "N followed by d, h, m or s (7d: older than a week)",
        )


_AGE = re.compile(r"([1-9][0-9]{0,6})([dhms])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_before(value, now=None):
    """The naive UTC time ``--before`` names (the database's clock is UTC)."""
    now = now or db_mod.utcnow()
    age = _AGE.fullmatch(value.strip())
    if age:
        return now - datetime.timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
    try:
        when = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise common.StartupError(
            f"--before {value!r}: expected an ISO 8601 time (2026-01-31T00:00:00Z) "
            "or an age (7d, 12h, 30m, 90s)"
        )
    if when.tzinfo is not None:
        when = when.astimezone(datetime.UTC).replace(tzinfo=None)
    return when


def _purge(conf, db):
    name = conf.category.name
    before = parse_before(conf.category.before)
    if name == "build-requests":
        count = build_request_obj.purge(db, before)
        what = "finished build request(s)"
    else:
        count = scheduling_report_obj.purge(db, before)
        what = "scheduling report(s)"
    print(f"{count} {what} last written before {before.isoformat()}Z purged")
    return 0


def _db_command(conf, db):
    if conf.category.db_command == "sync":
        migration.upgrade(db)
        db_mod.sync_standard_classes_and_traits(db)
        print(f"database at revision {migration.current(db)}")
    else:
        print(migration.current(db) or "None")
    return 0


def _inventory_load(conf, db):
    args = conf.category
    try:
        nodes = inventory_mod.load(args.file)
        counts = cluster_inventory.load(db, nodes, cells=args.cells)
    except (inventory_mod.InventoryError, cluster_inventory.LoadError) as exc:
        raise common.StartupError(str(exc))
    print(
        f"{counts['nodes']} nodes from {args.file}: {counts['created']} created, "
        f"{counts['updated']} updated, {counts['unchanged']} unchanged"
    )
    return 0


def _allocations_audit(conf, db):
    args = conf.category
    orphans = allocation_audit.find_orphans(db)
    deleted = 0
    for orphan in orphans:
        why = (
            f"build request {orphan['build_request']}"
            if orphan["build_request"]
            else "no build request"
        )
        action = ""
        if args.delete:
            if allocation_audit.delete_orphan(db, orphan["consumer_uuid"]):
                deleted += 1
                action = " (deleted)"
            else:
                action = " (no longer orphaned, kept)"
        print(f"orphaned allocations of consumer {orphan['consumer_uuid']}: {why}{action}")
        if args.verbose:
            for rp, resources in sorted(orphan["allocations"].items()):
                used = ", ".join(f"{rc}={n}" for rc, n in sorted(resources.items()))
                print(f"    provider {rp}: {used}")
    if not orphans:
        print("no orphaned allocations found")
        return 0
    if args.delete:
        print(f"{deleted} of {len(orphans)} orphaned consumer(s) deleted")
        return AUDIT_DELETED
    print(f"{len(orphans)} orphaned consumer(s) found; --delete removes them")
    return AUDIT_FOUND


_COMMANDS = {
    "db": _db_command,
    "inventory": _inventory_load,
    "allocations": _allocations_audit,
    "build-requests": _purge,
    "scheduling-reports": _purge,
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = "placement-manage"
    category = cfg.SubCommandOpt("category", title="commands", handler=_add_commands)

    def body():
        conf = common.parse_conf(argv, cli_opts=[category], prog=prog)
        if conf.category.name in ("build-requests", "scheduling-reports"):
            parse_before(conf.category.before)  # a bad time: exit 2 before connecting
        if conf.category.name == "inventory" and conf.category.cells < 1:
            raise common.StartupError("--cells must be at least 1")
        db = common.open_database(conf)
        try:
            if conf.category.name != "db":
                # On an empty or old schema: exit 2, naming db sync.
                try:
                    migration.check_current(db)
                except migration.SchemaNotCurrent as exc:
                    raise common.schema_error(exc)
            return _COMMANDS[conf.category.name](conf, db)
        except common.StartupError:
            raise
        except Exception as exc:
            name = conf.category.name
            what = f"{name} {getattr(conf.category, name.replace('-', '_') + '_command')}"
            raise common.StartupError(f"{what} failed: {db_mod._first_line(exc)}")
        finally:
            db.dispose()

    return common.run(body, prog)


if __name__ == "__main__":
    sys.exit(main())
