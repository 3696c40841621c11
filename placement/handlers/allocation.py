"""HTTP handlers: allocation (not built yet)."""

from placement import errors


def list_for_resource_provider(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def set_allocations(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def list_for_consumer(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def set_allocations_for_consumer(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def delete_allocations(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')


def workload_usages(**kwargs):
    raise errors.ApiError(501, 'not implemented yet')
