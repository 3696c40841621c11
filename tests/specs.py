"""Request specs of the wire contract (joule.request_spec) for tests.

``POST /build_requests`` checks its ``spec`` with the scheduler's contract, so
a test that records a build request sends a spec that contract loads.
"""

from joule import request_spec


def build_request_spec(instance_uuid, request_id, workload_class="standard", **fields):
    """A one-instance spec consistent with a build request's envelope."""
    spec = {
        "version": request_spec.REQUEST_SPEC_VERSION,
        "request_id": request_id,
        "instance_uuids": [instance_uuid],
        "workload_class": workload_class,
        "resources": {"VCPU": 1},
        "project_id": "p",
        "user_id": "u",
    }
    spec.update(fields)
    return spec
