"""The PostgreSQL connection budget of one placement-api, checked at start-up.

Each worker process has its own pool: up to ``pool_size`` connections kept
plus ``max_overflow`` opened under load, so one placement-api may hold
``workers x (pool_size + max_overflow)`` connections at once. PostgreSQL
refuses connections past ``max_connections`` minus the slots it keeps for
superusers (``superuser_reserved_connections``), and every other client of
the server (other placement-api hosts, placement-manage, monitoring)
shares those. Going over shows up only under load, as refused connections;
so placement-api says so in one warning at start-up instead.
docs/architecture.md ("Connection budget") has the arithmetic for a deployment.
"""

import dataclasses
import logging

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Budget:
    workers: int
    pool_size: int
    max_overflow: int
    max_connections: int
    reserved: int
    in_use: int

    @property
    def needed(self):
        return self.workers * (self.pool_size + self.max_overflow)

    @property
    def available(self):
        """Connections ordinary roles may open on the server at all."""
        return self.max_connections - self.reserved

    def describe(self):
        return (
            f"{self.workers} worker(s) x (pool_size {self.pool_size} + max_overflow "
            f"{self.max_overflow}) = {self.needed} connections; PostgreSQL "
            f"max_connections {self.max_connections} (superuser_reserved_connections "
            f"{self.reserved}, {self.in_use} in use now)"
        )


def pool_limits(engine):
    """(pool_size, max_overflow) of the engine's pool."""
    pool = engine.pool
    size = pool.size() if hasattr(pool, "size") else 0
    # QueuePool keeps max_overflow only in this attribute; -1 means unbounded.
    overflow = getattr(pool, "_max_overflow", 0)
    return size, overflow


def measure(db, workers):
    """The Budget of ``workers`` processes on ``db`` (PostgreSQL), or None elsewhere."""
    if not db.is_postgres:
        return None
    pool_size, max_overflow = pool_limits(db.engine)
    with db.engine.connect() as conn:
        max_connections = int(conn.exec_driver_sql("SHOW max_connections").scalar())
        reserved = int(conn.exec_driver_sql("SHOW superuser_reserved_connections").scalar())
        in_use = int(conn.exec_driver_sql("SELECT count(*) FROM pg_stat_activity").scalar())
    return Budget(workers, pool_size, max_overflow, max_connections, reserved, in_use)


def check(db, workers):
    """Log one warning when the budget does not fit; return the Budget (or None)."""
    budget = measure(db, workers)
    if budget is None:
        return None
    if budget.max_overflow < 0:
        LOG.warning(
            "connection budget: max_overflow is unbounded; %d worker(s) may open "
            "any number of connections against PostgreSQL max_connections %d",
            budget.workers,
            budget.max_connections,
        )
    elif budget.needed > budget.available:
        LOG.warning(
            "connection budget exceeded: %s. Under load requests will fail "
            "to connect: lower --workers or [placement_database] pool_size, "
            "or raise max_connections",
            budget.describe(),
        )
    else:
        LOG.info("connection budget: %s", budget.describe())
    return budget
