"""server groups and their members

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 23:00:00

Nova's server groups as a placement extension: a claim that names a group
(or moves a member) is checked against the group's policy in the same
transaction as the allocation write.
"""

from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'server_groups',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('project_id', sa.String(length=255), nullable=False),
        sa.Column('user_id', sa.String(length=255), nullable=False),
        sa.Column('policy', sa.String(length=32), nullable=False),
        sa.Column('max_server_per_host', sa.Integer(), nullable=True),
        sa.Column('generation', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_server_groups')),
        sa.UniqueConstraint('uuid', name=op.f('uq_server_groups_uuid')),
    )
    op.create_index('ix_server_groups_project_id', 'server_groups', ['project_id'],
                    unique=False)
    op.create_table(
        'server_group_members',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('group_id', sa.Integer(), nullable=False),
        sa.Column('instance_uuid', sa.String(length=36), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['group_id'], ['server_groups.id'],
                                name=op.f('fk_server_group_members_group_id_server_groups'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_server_group_members')),
        sa.UniqueConstraint('instance_uuid',
                            name=op.f('uq_server_group_members_instance_uuid')),
    )
    op.create_index('ix_server_group_members_group_id', 'server_group_members',
                    ['group_id'], unique=False)


def downgrade():
    op.drop_index('ix_server_group_members_group_id', table_name='server_group_members')
    op.drop_table('server_group_members')
    op.drop_index('ix_server_groups_project_id', table_name='server_groups')
    op.drop_table('server_groups')
