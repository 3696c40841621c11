"""placement-manage: database administration (db sync | db version)."""

import sys

from oslo_config import cfg

from placement import db as db_mod
from placement import migration
from placement.cmd import common


def _add_commands(subparsers):
    db = subparsers.add_parser("db", help="database commands")
    db_sub = db.add_subparsers(dest="db_command")
    db_sub.required = True
    db_sub.add_parser("sync", help="create or upgrade the schema (idempotent)")
    db_sub.add_parser("version", help="print the schema revision")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = "placement-manage"
    category = cfg.SubCommandOpt("category", title="commands", handler=_add_commands)

    def body():
        conf = common.parse_conf(argv, cli_opts=[category], prog=prog)
        db = common.open_database(conf)
        try:
            if conf.category.db_command == "sync":
                migration.upgrade(db)
                db_mod.sync_standard_classes_and_traits(db)
                print(f"database at revision {migration.current(db)}")
            else:
                print(migration.current(db) or "None")
        except Exception as exc:
            raise common.StartupError(f"db {conf.category.db_command} failed: "
                                      f"{db_mod._first_line(exc)}")
        finally:
            db.dispose()

    return common.run(body, prog)


if __name__ == "__main__":
    sys.exit(main())
