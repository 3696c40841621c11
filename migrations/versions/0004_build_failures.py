"""build failures per host

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 23:25:00

Consecutive failed builds per root provider, reported by the conductors and
cleared by a successful build: what the scheduler's BuildFailureWeigher reads
from the candidates' node data.
"""

from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'build_failures',
        sa.Column('resource_provider_id', sa.Integer(), nullable=False),
        sa.Column('failed_builds', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['resource_provider_id'], ['resource_providers.id'],
                                name=op.f('fk_build_failures_resource_provider_id_'
                                          'resource_providers'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('resource_provider_id', name=op.f('pk_build_failures')),
    )


def downgrade():
    op.drop_table('build_failures')
