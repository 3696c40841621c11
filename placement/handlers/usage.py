"""HTTP handlers: usage (not built yet)."""

from placement import errors


def list_usages(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_total_usages(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
