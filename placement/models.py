"""The placement schema, as SQLAlchemy Core tables.

One schema for SQLite and PostgreSQL; ``migrations/`` creates exactly this
(``tests/functional/db/test_migrations.py`` checks there is no drift).

Upstream-compatible part: resource classes, traits, providers (with nested
trees), inventories, aggregates, consumers, allocations. Extensions (never
visible to a vanilla client): the workload class of a consumer, node records,
node hardware, node twins, build requests and scheduling reports.
"""

from sqlalchemy import BigInteger
from sqlalchemy import Boolean
from sqlalchemy import Column
from sqlalchemy import DateTime
from sqlalchemy import Float
from sqlalchemy import ForeignKey
from sqlalchemy import Index
from sqlalchemy import Integer
from sqlalchemy import MetaData
from sqlalchemy import String
from sqlalchemy import Table
from sqlalchemy import Text
from sqlalchemy import UniqueConstraint

from joule import vocabulary

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _timestamps():
    return [
        Column("created_at", DateTime, nullable=False),
        Column("updated_at", DateTime, nullable=True),
    ]


# Standard classes keep the id of their position in os_resource_classes.STANDARDS;
# custom classes start at CUSTOM_RC_ID_BASE, so a standard class added by a newer
# os-resource-classes release never collides with a custom one.
resource_classes = Table(
    "resource_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String(255), nullable=False, unique=True),
    *_timestamps(),
)

traits = Table(
    "traits",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    *_timestamps(),
)

resource_providers = Table(
    "resource_providers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("generation", Integer, nullable=False, default=0),
    Column("root_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    Column("parent_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    *_timestamps(),
    Index("ix_resource_providers_root_provider_id", "root_provider_id"),
    Index("ix_resource_providers_parent_provider_id", "parent_provider_id"),
)

inventories = Table(
    "inventories",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"), nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("reserved", BigInteger, nullable=False),
    Column("min_unit", BigInteger, nullable=False),
    Column("max_unit", BigInteger, nullable=False),
    Column("step_size", BigInteger, nullable=False),
    Column("allocation_ratio", Float, nullable=False),
    *_timestamps(),
    UniqueConstraint("resource_provider_id", "resource_class_id"),
    Index("ix_inventories_resource_class_id", "resource_class_id"),
)

placement_aggregates = Table(
    "placement_aggregates",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", String(36), nullable=False, unique=True),
)

resource_provider_aggregates = Table(
    "resource_provider_aggregates",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column(
        "aggregate_id",
        Integer,
        ForeignKey("placement_aggregates.id"),
        primary_key=True,
    ),
    Index("ix_resource_provider_aggregates_aggregate_id", "aggregate_id"),
)

resource_provider_traits = Table(
    "resource_provider_traits",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("trait_id", Integer, ForeignKey("traits.id"), primary_key=True),
    Index("ix_resource_provider_traits_trait_id", "trait_id"),
)

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("external_id", String(255), nullable=False, unique=True),
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("external_id", String(255), nullable=False, unique=True),
)

consumer_types = Table(
    "consumer_types",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
)

# workload_class is the design's extension: one of vocabulary.WORKLOAD_CLASSES.
consumers = Table(
    "consumers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("consumer_type_id", Integer, ForeignKey("consumer_types.id"), nullable=True),
    Column("workload_class", String(16), nullable=False, default=vocabulary.DEFAULT_WORKLOAD_CLASS),
    *_timestamps(),
    Index("ix_consumers_project_id_user_id", "project_id", "user_id"),
)

allocations = Table(
    "allocations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id"),
        nullable=False,
    ),
    Column("consumer_id", String(36), nullable=False),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"), nullable=False),
    Column("used", BigInteger, nullable=False),
    *_timestamps(),
    Index(
        "ix_allocations_resource_provider_id_resource_class_id",
        "resource_provider_id",
        "resource_class_id",
    ),
    Index("ix_allocations_consumer_id", "consumer_id"),
)

# --- extensions -------------------------------------------------------------

# One node record per root provider: where it is and whether it may take work.
nodes = Table(
    "nodes",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("cell", String(255), nullable=True),
    Column("labels", Text, nullable=False, default="{}"),  # JSON object of str -> str
    Column("reserved", Boolean, nullable=False, default=False),
    Column("unschedulable", Boolean, nullable=False, default=False),
    Column("generation", Integer, nullable=False, default=0),
    # The node agent's last heartbeat, the database's clock (migration 0005);
    # null: no agent ever reported (a node loaded from a file).
    Column("heartbeat_at", DateTime, nullable=True),
    *_timestamps(),
    Index("ix_nodes_cell", "cell"),
)

# What NodeHardware holds in Joulie: the family key comes from the raw model strings.
node_hardware = Table(
    "node_hardware",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("cpu_model", String(255), nullable=True),
    Column("cpu_sockets", Integer, nullable=True),
    Column("cpu_cores", Integer, nullable=True),
    Column("memory_gib", Integer, nullable=True),
    Column("gpu_vendor", String(64), nullable=True),
    Column("gpu_model", String(255), nullable=True),
    Column("gpu_count", Integer, nullable=False, default=0),
    Column("gpu_min_cap_watts", Float, nullable=True),
    Column("gpu_max_cap_watts", Float, nullable=True),
    Column("cpu_min_cap_watts", Float, nullable=True),
    Column("cpu_max_cap_watts", Float, nullable=True),
    *_timestamps(),
)

# Desired power state (spec) and what the scheduler may do with the node (status).
node_twins = Table(
    "node_twins",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("profile", String(16), nullable=False),  # performance | eco
    Column("cpu_cap_watts", Float, nullable=True),
    Column("gpu_cap_watts", Float, nullable=True),
    Column("managed_by", String(255), nullable=True),
    Column("schedulable_class", String(16), nullable=False),  # performance | eco | draining
    # on | suspending | off | waking; null: never managed, on (migration 0007)
    Column("power_state", String(16), nullable=True),
    Column("generation", Integer, nullable=False, default=0),
    # What the node agent applied and measured (JSON object), and when.
    Column("status", Text, nullable=True),
    Column("status_updated_at", DateTime, nullable=True),
    *_timestamps(),
    Index("ix_node_twins_schedulable_class", "schedulable_class"),
)

# Build requests the conductor accepted: pending ones count as performance demand.
build_requests = Table(
    "build_requests",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("instance_uuid", String(36), nullable=False, unique=True),
    Column("request_id", String(64), nullable=False),
    Column("workload_class", String(16), nullable=False, default=vocabulary.DEFAULT_WORKLOAD_CLASS),
    Column("status", String(16), nullable=False),  # pending | placed | failed
    Column("spec", Text, nullable=False),  # JSON request spec
    Column("host_uuid", String(36), nullable=True),
    Column("reason", Text, nullable=True),
    # Ownership of the work (migration 0002): the conductor that holds the
    # record, until when, and a generation every write bumps, so taking a
    # record is a compare-and-set and a dead conductor's record can be taken
    # over once its lease has expired.
    Column("owner", String(255), nullable=True),
    Column("lease_expires_at", DateTime, nullable=True),
    Column("generation", Integer, nullable=False, default=0, server_default="0"),
    # How a placed instance ended (migration 0006), as its node agent
    # reported it: finished | errored | deleted | lost; null while it runs.
    Column("instance_state", String(16), nullable=True),
    Column("exit_status", Integer, nullable=True),
    Column("state_reason", Text, nullable=True),
    Column("state_updated_at", DateTime, nullable=True),
    *_timestamps(),
    Index("ix_build_requests_status_workload_class", "status", "workload_class"),
    Index("ix_build_requests_status_lease_expires_at", "status", "lease_expires_at"),
    Index("ix_build_requests_request_id", "request_id"),
)

# One report per scheduling request, readable back by request id.
scheduling_reports = Table(
    "scheduling_reports",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("request_id", String(64), nullable=False, unique=True),
    Column("project_id", String(255), nullable=True),
    Column("body", Text, nullable=False),  # JSON
    *_timestamps(),
)

# Server groups (extension, migration 0003): nova's instance groups, kept
# next to the allocations so that a claim checks the group's policy in the
# transaction that writes it. A member's hosts are not stored: they are the
# roots of the providers its allocations are on, so a move or a release
# updates them with no second record to keep in step.
server_groups = Table(
    "server_groups",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    # affinity | anti-affinity | soft-affinity | soft-anti-affinity
    Column("policy", String(32), nullable=False),
    # anti-affinity's max_server_per_host (nova API 2.64 rules); null: 1
    Column("max_server_per_host", Integer, nullable=True),
    # Bumped by every membership change: a client that read the group can
    # tell whether it moved since.
    Column("generation", Integer, nullable=False, default=0, server_default="0"),
    *_timestamps(),
    Index("ix_server_groups_project_id", "project_id"),
)

# An instance (consumer uuid, which may hold no allocation yet or any more)
# belongs to at most one group, as in nova.
server_group_members = Table(
    "server_group_members",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("group_id", Integer, ForeignKey("server_groups.id", ondelete="CASCADE"), nullable=False),
    Column("instance_uuid", String(36), nullable=False, unique=True),
    Column("created_at", DateTime, nullable=False),
    Index("ix_server_group_members_group_id", "group_id"),
)

# Consecutive failed builds per host (root provider), migration 0004: the
# conductors report each build's outcome, a success clears the count, and the
# scheduler's BuildFailureWeigher reads it from the candidates' node data.
build_failures = Table(
    "build_failures",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("failed_builds", Integer, nullable=False, default=0, server_default="0"),
    *_timestamps(),
)
