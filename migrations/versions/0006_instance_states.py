"""how a placed instance ended

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 12:00:00

A placed build request is an instance that runs until its node agent
reports it ended (build_requests.instance_state: finished, errored,
deleted or lost; null while it runs), with its exit status, why, and when
the end was recorded.
"""

from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('build_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('instance_state', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('exit_status', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('state_reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('state_updated_at', sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table('build_requests', schema=None) as batch_op:
        batch_op.drop_column('state_updated_at')
        batch_op.drop_column('state_reason')
        batch_op.drop_column('exit_status')
        batch_op.drop_column('instance_state')
