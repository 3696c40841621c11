"""oslo.config options of the placement service.

Option names follow upstream OpenStack Placement wherever upstream has the
option, so an existing ``placement.conf`` keeps working. Every option can also
be set from the environment as ``OS_<GROUP>__<OPTION>`` (oslo.config's
environment source), e.g. ``OS_PLACEMENT_DATABASE__CONNECTION``.
"""

import os

from oslo_config import cfg
from oslo_middleware import cors
from oslo_middleware.healthcheck import opts as healthcheck_opts

from joule import config
from placement import policy

api_group = cfg.OptGroup("api", title="API options")
database_group = cfg.OptGroup("placement_database", title="Placement database")
placement_group = cfg.OptGroup("placement", title="Placement behaviour")
metrics_group = cfg.OptGroup("metrics", title="Prometheus metrics at /metrics")
healthcheck_group = cfg.OptGroup("healthcheck", title="oslo.middleware healthcheck at /healthcheck")

# /healthcheck checks the database unless the operator says otherwise
# (placement.healthcheck.DatabaseHealthcheck; oslo.middleware's default is no
# backend, which is healthy whenever the process answers).
cfg.set_defaults(healthcheck_opts.HEALTHCHECK_OPTS, backends=["placement_database"])


def default_state_dir():
    """Per-user state directory (XDG_STATE_HOME), where the SQLite file lives."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "placement")


def default_connection():
    return "sqlite:///" + os.path.join(default_state_dir(), "placement.sqlite")


api_opts = [
    cfg.StrOpt(
        "auth_strategy",
        default="noauth2",
        choices=[
            ("keystone", "Use keystonemiddleware's auth_token to validate tokens."),
            (
                "noauth2",
                "Development only: the token 'admin' is an admin, any other token is "
                "a plain user; X-Roles, X-Project-Id and OpenStack-System-Scope "
                "headers are honoured.",
            ),
        ],
        help="Authentication strategy of the API. The default, noauth2, suits the embedded "
        "single-machine setup: it answers only requests addressed to a loopback name "
        "(Host: localhost, 127.0.0.0/8 or ::1) and placement-api refuses to listen "
        "beyond loopback with it unless allow_insecure_noauth is set. Production "
        "deployments use keystone.",
    ),
    cfg.BoolOpt(
        "allow_insecure_noauth",
        default=False,
        help="Let auth_strategy = noauth2 listen on a non-loopback address and answer "
        "requests whatever their Host header. With noauth2 any caller who can reach the "
        "port is an admin: only for a test network nobody else can reach.",
    ),
    cfg.IntOpt(
        "max_request_body_size",
        default=1024 * 1024,
        min=1,
        help="Largest request body in bytes. A larger one is refused with 413 "
        "placement.request.too_large before it is read (chunked bodies as soon as they "
        "pass the limit). The default holds a POST /allocations of about 2,500 "
        "consumers or a POST /reshaper of a 1,000-provider tree.",
    ),
    cfg.FloatOpt(
        "lingering_time",
        default=30.0,
        min=0.0,
        help="After a 413, seconds in all the server keeps reading and discarding what "
        "the client still sends before it closes the connection (nginx's lingering "
        "close), so that a client that sends its whole body before it reads the answer "
        "sees the 413 rather than a connection reset. placement-api's own server only.",
    ),
    cfg.FloatOpt(
        "lingering_timeout",
        default=5.0,
        min=0.0,
        help="After a 413, seconds without a byte from the client after which the "
        "server stops waiting for the rest of the body and closes. placement-api's own "
        "server only.",
    ),
    cfg.IntOpt(
        "lingering_size",
        default=64 * 1024 * 1024,
        min=0,
        help="After a 413, bytes the server reads and discards at most before it closes "
        "the connection; a client sending a larger body sees a reset. placement-api's "
        "own server only.",
    ),
    cfg.FloatOpt(
        "client_header_timeout",
        default=10.0,
        min=0.1,
        help="Seconds a client may take to send the request line and headers, from its "
        "first byte; a slower client (e.g. slowloris) is disconnected. placement-api's "
        "own server only.",
    ),
    cfg.FloatOpt(
        "client_body_timeout",
        default=30.0,
        min=0.1,
        help="Seconds a client may take to send a whole request body once its headers are "
        "in; a slower client gets 408 and is disconnected. placement-api's own server "
        "only.",
    ),
    cfg.FloatOpt(
        "keepalive_timeout",
        default=30.0,
        min=0.1,
        help="Seconds an open connection may wait for its first or next request before "
        "the server closes it. placement-api's own server only.",
    ),
]

database_opts = [
    cfg.StrOpt(
        "connection",
        secret=True,
        sample_default="sqlite:///$XDG_STATE_HOME/placement/placement.sqlite",
        help="SQLAlchemy URL of the placement database. Default: an SQLite file in the "
        "per-user state directory, created on first start. Production: "
        "postgresql+psycopg://user:pass@host/placement.",
    ),
    cfg.BoolOpt(
        "sync_on_startup",
        default=False,
        help="Run the database migrations (placement-manage db sync) when the API starts. "
        "The embedded SQLite default always syncs, since nothing else would create it.",
    ),
    cfg.IntOpt(
        "pool_size",
        default=10,
        min=1,
        help="Connections kept per API process (PostgreSQL only).",
    ),
    # Time limits: together they bound how long a request waits on the
    # database (docs/architecture.md, "Database faults"). A limit that runs out
    # is a 503 placement.database.unavailable with Retry-After.
    cfg.FloatOpt(
        "connect_timeout",
        default=5.0,
        min=0.5,
        help="Seconds to open a connection (TCP and start-up handshake; libpq counts "
        "whole seconds, at least 2), and to check a pooled connection before use "
        "(PostgreSQL only).",
    ),
    cfg.FloatOpt(
        "pool_timeout",
        default=10.0,
        min=0.1,
        help="Seconds a request waits for a free pooled connection when all "
        "pool_size x 2 are in use (PostgreSQL only).",
    ),
    cfg.FloatOpt(
        "statement_timeout",
        default=30.0,
        min=0,
        help="Seconds one SQL statement may run before PostgreSQL cancels it; 0 for no "
        "limit. The client also gives up on a server that does not answer within this "
        "plus 2 s (a paused or unreachable server), closing the connection.",
    ),
    cfg.FloatOpt(
        "lock_timeout",
        default=5.0,
        min=0,
        help="Seconds a statement waits for a row or table lock (e.g. a provider held "
        "FOR UPDATE by a concurrent allocation write) before PostgreSQL gives up; 0 for "
        "no limit.",
    ),
    cfg.FloatOpt(
        "idle_in_transaction_timeout",
        default=10.0,
        min=0,
        help="Seconds a session may sit idle inside a transaction before PostgreSQL ends "
        "it, releasing its locks (a paused or stuck API worker cannot hold providers "
        "locked longer); 0 for no limit.",
    ),
    cfg.FloatOpt(
        "sqlite_busy_timeout",
        default=10.0,
        min=0,
        help="Seconds an SQLite transaction waits for the database file lock held by "
        "another writer before giving up (SQLite only).",
    ),
]

metrics_opts = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Count and time every request for Prometheus and serve the samples at "
        "GET /metrics on the API port (placement.metrics).",
    ),
    cfg.ListOpt(
        "allowed_source_ranges",
        default=["127.0.0.0/8", "::1/128"],
        help="Networks (CIDR) that may read GET /metrics without a token. A request from "
        "anywhere else, or one carrying a proxy header (Forwarded, X-Forwarded-For, "
        "X-Real-IP), gets 404 as if the path did not exist. Add the Prometheus server's "
        "address here; an empty list hides /metrics from everyone.",
    ),
]

placement_opts = [
    cfg.BoolOpt(
        "randomize_allocation_candidates",
        default=False,
        help="When true, GET /allocation_candidates with a limit returns a random sample "
        "of the viable candidates; when false, the first ones in a deterministic but "
        "undefined order. Randomizing spreads concurrent schedulers over more hosts at "
        "the price of repeatable answers.",
    ),
    cfg.IntOpt(
        "allocation_conflict_retry_count",
        default=10,
        min=0,
        help="How many times an allocation write that lost a race with a concurrent "
        "writer of the same provider is retried on the server, each time in a fresh "
        "transaction, before the client gets 409 placement.concurrent_update.",
    ),
    cfg.IntOpt(
        "max_allocation_candidates",
        default=-1,
        help="Upper bound on the allocation candidates one request may produce, -1 for "
        "no bound. Bounds the cost of pathological nested/sharing requests.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_project_id",
        default="00000000-0000-0000-0000-000000000000",
        help="Project id recorded for consumers written before microversion 1.8, which "
        "did not require one.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_user_id",
        default="00000000-0000-0000-0000-000000000000",
        help="User id recorded for consumers written before microversion 1.8.",
    ),
]


def register_opts(conf):
    for group, opts in (
        (api_group, api_opts),
        (database_group, database_opts),
        (placement_group, placement_opts),
        (metrics_group, metrics_opts),
    ):
        # A fresh OptGroup per ConfigOpts: register_group() copies the group
        # only shallowly, so a shared group object would carry one ConfigOpts'
        # set_override() into every other one (tests, two apps in a process).
        conf.register_group(cfg.OptGroup(group.name, title=group.title))
        conf.register_opts(opts, group=group.name)
    # Library groups are registered up front so that config files, overrides
    # and OS_<GROUP>__<OPTION> variables for them work before the app starts.
    conf.register_opts(cors.CORS_OPTS, group="cors")
    conf.register_opts(healthcheck_opts.HEALTHCHECK_OPTS, group=healthcheck_group.name)
    policy.register_opts(conf)


def list_opts():
    """Entry point of oslo-config-generator (``oslo.config.opts``)."""
    return [
        (api_group, api_opts),
        (database_group, database_opts),
        (placement_group, placement_opts),
        (metrics_group, metrics_opts),
        # oslo.middleware's options with our default backends (the database check).
        (healthcheck_group, healthcheck_opts.HEALTHCHECK_OPTS),
        # [oslo_policy] enforce_scope (compatibility); oslo.policy's own options
        # come from its namespace in etc/placement/config-generator.conf.
        (cfg.OptGroup("oslo_policy"), policy.compat_opts),
    ]


def make_conf(args=None, default_config_files=None, overrides=None):
    """Build a fresh ConfigOpts (never the global one, so tests stay isolated).

    ``overrides`` maps ``(group, option)`` to a value and wins over files and
    the environment; tests and the demo use it.
    """
    return config.make_conf(register_opts, args, default_config_files, overrides, "placement")


def connection_url(conf):
    return conf.placement_database.connection or default_connection()
