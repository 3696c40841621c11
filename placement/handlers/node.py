"""HTTP handlers: node (not built yet)."""

from placement import errors


def list_nodes(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_node(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def put_node(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_node(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_hardware(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def put_hardware(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_twin(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def put_twin(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
