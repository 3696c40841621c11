"""HTTP handlers: inventory (not built yet)."""

from placement import errors


def get_inventories(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def create_inventory(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def set_inventories(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_inventories(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def get_inventory(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def update_inventory(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_inventory(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
