"""HTTP handlers: build request (not built yet)."""

from placement import errors


def list_build_requests(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def create_build_request(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_build_request(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def update_build_request(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
