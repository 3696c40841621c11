"""HTTP handlers: allocation candidate (not built yet)."""

from placement import errors


def list_allocation_candidates(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
