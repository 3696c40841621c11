"""HTTP handlers: trait (not built yet)."""

from placement import errors


def list_traits(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_trait(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def put_trait(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_trait(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def list_traits_for_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def update_traits_for_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_traits_for_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
