"""Alembic migrations of the placement schema (run by ``placement-manage db sync``)."""
