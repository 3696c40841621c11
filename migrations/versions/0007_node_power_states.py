"""node power states

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 15:00:00

A node's twin carries its power state beside its profile (on, suspending,
off, waking; null for a twin that never had one, which is on): the power
controller suspends idle nodes and wakes them for work, and the scheduler
places only on nodes that are on.
"""

from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('node_twins', schema=None) as batch_op:
        batch_op.add_column(sa.Column('power_state', sa.String(length=16), nullable=True))


def downgrade():
    with op.batch_alter_table('node_twins', schema=None) as batch_op:
        batch_op.drop_column('power_state')
