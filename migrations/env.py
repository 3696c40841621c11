"""Alembic environment: the URL comes from the caller (placement.migration)."""

from alembic import context

from placement import models

config = context.config
target_metadata = models.metadata


def run_migrations_online():
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations through placement.migration, not the alembic CLI")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
