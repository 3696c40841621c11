"""HTTP handlers: reshaper (not built yet)."""

from placement import errors


def reshape(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
