"""HTTP handlers: resource class (not built yet)."""

from placement import errors


def list_resource_classes(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def create_resource_class(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_resource_class(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def update_resource_class(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_resource_class(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
