"""build requests: owner, lease and generation

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 22:15:00

A conductor takes a build request with a compare-and-set on its generation
and holds it for a lease; records that existed before have no owner and
generation 0, which is what a record nobody holds looks like.
"""

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('build_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('lease_expires_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('generation', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.create_index('ix_build_requests_status_lease_expires_at',
                              ['status', 'lease_expires_at'], unique=False)
        batch_op.create_index('ix_build_requests_request_id', ['request_id'], unique=False)


def downgrade():
    with op.batch_alter_table('build_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_build_requests_request_id')
        batch_op.drop_index('ix_build_requests_status_lease_expires_at')
        batch_op.drop_column('generation')
        batch_op.drop_column('lease_expires_at')
        batch_op.drop_column('owner')
