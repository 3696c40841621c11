"""``placement.wsgi.api:application``: the API for uwsgi, mod_wsgi or any WSGI server.

    uwsgi --http :8778 --module placement.wsgi.api:application --processes 4 --master

Configuration as upstream's ``placement.wsgi``: ``$OS_PLACEMENT_CONFIG_DIR/placement.conf``
when that variable is set, otherwise oslo.config's default search for the
project ``placement`` (``~/.placement/``, ``~/``, ``/etc/placement/``, ``/etc/``,
each ``placement.conf``); ``OS_<GROUP>__<OPTION>`` environment variables
override the files. A bad configuration or an unreachable database fails the
import with one line, so ``uwsgi --need-app`` exits instead of serving 500s.

Several processes: set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory
writable by the server, so that /metrics counts every process (placement.metrics).
The module is imported once and may then be forked (uwsgi without
``lazy-apps``): no database connection is left open across the fork.
"""

import logging
import os

from placement import app as app_mod
from placement import metrics
from placement.cmd import common

CONFIG_DIR_ENV = "OS_PLACEMENT_CONFIG_DIR"
CONFIG_FILE = "placement.conf"
LOG = logging.getLogger(__name__)


def config_args(environ=None):
    """oslo.config arguments naming the config file of OS_PLACEMENT_CONFIG_DIR."""
    environ = os.environ if environ is None else environ
    config_dir = environ.get(CONFIG_DIR_ENV, "").strip()
    if not config_dir:
        return []  # oslo.config's default search for project "placement"
    return ["--config-file", os.path.join(config_dir, CONFIG_FILE)]


def init_application(environ=None):
    try:
        conf = common.parse_conf(config_args(environ), prog="placement-wsgi")
        db = common.open_database(conf)
        app = app_mod.create_app(conf, db=db)
    except common.StartupError as exc:
        raise RuntimeError(f"placement: {exc}") from None
    except Exception as exc:
        raise RuntimeError(f"placement: cannot start: {exc}") from exc
    # Whatever start-up opened is closed before a pre-forking server forks:
    # each process opens its own connections.
    db.dispose()
    metrics.forget_pool()
    LOG.info("placement API loaded (%s)", db.dialect)
    return app


application = init_application()
