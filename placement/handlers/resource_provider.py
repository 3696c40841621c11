"""HTTP handlers: resource provider (not built yet)."""

from placement import errors


def list_resource_providers(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def create_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def update_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
