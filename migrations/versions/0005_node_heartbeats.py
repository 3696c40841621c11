"""node heartbeats and twin status

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:00:00

The node agent's reports: when it was last heard from (nodes.heartbeat_at,
stamped with the database's clock; null for a node no agent ever reported,
such as one loaded from an inventory file) and what it applied and measured
of its twin's spec (node_twins.status, a JSON object, and when it came).
"""

from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('heartbeat_at', sa.DateTime(), nullable=True))
    with op.batch_alter_table('node_twins', schema=None) as batch_op:
        batch_op.add_column(sa.Column('status', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('status_updated_at', sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table('node_twins', schema=None) as batch_op:
        batch_op.drop_column('status_updated_at')
        batch_op.drop_column('status')
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.drop_column('heartbeat_at')
