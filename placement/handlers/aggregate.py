"""HTTP handlers: aggregate (not built yet)."""

from placement import errors


def get_aggregates(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def set_aggregates(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
