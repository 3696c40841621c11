"""placement-status upgrade check: is this deployment ready for this release?

oslo.upgradecheck's command, as every OpenStack service has it:

    placement-status [--config-file placement.conf] upgrade check [--json]

Run it with the new code before starting the services. Exit status 0 when
every check passes, 1 when one warns, 2 when one fails (the upgrade would
not work), 255 when a check itself broke. The checks:

- Database: reachable, and its schema at this release's head revision
  (else: run ``placement-manage db sync``). An SQLite file that does not exist
  is a failure, never created here.
- Policy file: ``[oslo_policy] policy_file``, when present, is YAML (JSON is
  deprecated), parses, and names only rules this release knows.
- API authentication: noauth2 makes every caller an admin. On an address
  other than loopback (``[DEFAULT] host``, the option placement-api reads)
  it is a failure (placement-api refuses to start there), or a warning when
  ``[api] allow_insecure_noauth`` lets it.
- Connection budget (PostgreSQL): ``workers x (pool_size + max_overflow)``
  fits ``max_connections`` (placement.connection_budget).
"""

import logging
import os
import sys

import sqlalchemy as sa
from oslo_policy import policy as oslo_policy
from oslo_upgradecheck import common_checks
from oslo_upgradecheck import upgradecheck

from placement import conf as conf_mod
from placement import connection_budget
from placement import db as db_mod
from placement import host as host_mod
from placement import migration
from placement import policies
from placement.cmd import api as api_cmd
from placement.cmd import common

Code = upgradecheck.Code
Result = upgradecheck.Result


def _unparseable_rules(rules):
    """Names of the rules whose check string oslo.policy cannot parse.

    oslo.policy does not refuse such a rule: it logs a traceback and makes it
    a rule that denies everyone. Here that is a failure, said in one line.
    """
    parser_log = logging.getLogger("oslo_policy._parser")
    was_disabled, parser_log.disabled = parser_log.disabled, True
    try:
        broken = []
        for name, text in rules.items():
            if not isinstance(text, str):
                broken.append(name)
                continue
            check = oslo_policy.Rules.from_dict({name: text})[name]
            if str(check) == "!" and text.strip() != "!":
                broken.append(name)
        return sorted(broken)
    finally:
        parser_log.disabled = was_disabled


class Checks(upgradecheck.UpgradeCommands):
    def __init__(self, conf):
        self.conf = conf

    def _database(self):
        text = conf_mod.connection_url(self.conf)
        url = sa.engine.make_url(text)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            if not os.path.exists(url.database):
                return Result(
                    Code.FAILURE,
                    f"no database file {url.database}: start "
                    f"placement-api once or run '{migration.SYNC_COMMAND}'",
                )
        # With the configured time limits: a paused server fails the check
        # instead of hanging it.
        db = db_mod.Database.from_conf(self.conf, text)
        try:
            db.check()
            migration.check_current(db)
        except (db_mod.DatabaseError, migration.SchemaNotCurrent) as exc:
            return Result(Code.FAILURE, str(exc))
        except sa.exc.DBAPIError as exc:  # e.g. a time limit while reading the revision
            return Result(
                Code.FAILURE, f"cannot read the schema revision: {db_mod._first_line(exc)}"
            )
        finally:
            db.dispose()
        return Result(Code.SUCCESS, f"schema at revision {migration.head()}")

    def _policy_file(self):
        json_check = common_checks.check_policy_json(self, conf=self.conf)
        if json_check.code != Code.SUCCESS:
            return Result(Code.WARNING, json_check.details)
        path = self.conf.find_file(self.conf.oslo_policy.policy_file)
        if not path:
            return Result(Code.SUCCESS, "no policy file: the built-in defaults apply")
        try:
            with open(path) as src:
                rules = oslo_policy.parse_file_contents(src.read())
        except (OSError, ValueError) as exc:
            return Result(
                Code.FAILURE, f"{path} cannot be read: {str(exc).strip().splitlines()[0]}"
            )
        if not isinstance(rules, dict):
            return Result(Code.FAILURE, f"{path} is not a mapping of rule names to rules")
        broken = _unparseable_rules(rules)
        if broken:
            return Result(
                Code.FAILURE,
                f"{path}: rules that do not parse (oslo.policy would "
                f"deny everything they guard): {', '.join(broken)}",
            )
        known = {rule.name for rule in policies.list_rules()}
        unknown = sorted(set(rules) - known)
        if unknown:
            return Result(
                Code.WARNING,
                f"{path} sets rules this release does not have "
                f"(misspelt or removed): {', '.join(unknown)}",
            )
        return Result(Code.SUCCESS, f"{path}: {len(rules)} rule(s), all known")

    def _auth(self):
        if self.conf.api.auth_strategy != "noauth2":
            return Result(Code.SUCCESS, f"auth_strategy = {self.conf.api.auth_strategy}")
        host = self.conf.host
        if host_mod.is_loopback(host):
            return Result(
                Code.SUCCESS,
                f"noauth2 on loopback ({host}) only: development "
                "setup; use auth_strategy = keystone in production",
            )
        if not self.conf.api.allow_insecure_noauth:
            return Result(
                Code.FAILURE,
                f"auth_strategy = noauth2 with host = {host}: "
                "placement-api refuses to start; use auth_strategy = keystone",
            )
        return Result(
            Code.WARNING,
            f"auth_strategy = noauth2 with host = {host} and "
            "allow_insecure_noauth: anyone who can reach the port is an admin; "
            "use auth_strategy = keystone",
        )

    def _connection_budget(self):
        url = conf_mod.connection_url(self.conf)
        if sa.engine.make_url(url).get_backend_name() != "postgresql":
            return Result(Code.SUCCESS, "not PostgreSQL: one process, one writer")
        db = db_mod.Database.from_conf(self.conf, url)
        workers = self.conf.workers or os.cpu_count() or 2
        try:
            budget = connection_budget.measure(db, workers)
        except Exception as exc:  # the Database check reports why
            return Result(Code.WARNING, f"cannot ask PostgreSQL: {db_mod._first_line(exc)}")
        finally:
            db.dispose()
        if budget.max_overflow >= 0 and budget.needed > budget.available:
            return Result(Code.WARNING, f"exceeded: {budget.describe()}")
        return Result(Code.SUCCESS, budget.describe())

    _upgrade_checks = (
        ("Database", _database),
        ("Policy File", _policy_file),
        ("API Authentication", _auth),
        ("Connection Budget", _connection_budget),
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = "placement-status"

    def setup(conf):
        # placement-api's --host, --workers, ... as [DEFAULT] options of the
        # config file, which is where a deployment sets them for both.
        conf.register_opts(api_cmd.cli_opts)
        upgradecheck.register_cli_options(conf, Checks(conf))

    def body():
        conf = common.parse_conf(argv, prog=prog, setup=setup)
        # oslo.upgradecheck reads --json from its module's CONF.
        upgradecheck.CONF = conf
        return upgradecheck.run(conf)

    return common.run(body, prog)


if __name__ == "__main__":
    sys.exit(main())
