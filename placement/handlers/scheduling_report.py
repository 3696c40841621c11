"""HTTP handlers: scheduling report (not built yet)."""

from placement import errors


def get_report(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def put_report(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
