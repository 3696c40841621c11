"""Request specs of the wire contract (joule.request_spec) for tests, as
dicts (the wire form).

``POST /build_requests`` checks its ``spec`` with the scheduler's contract, so
a test that records a build request sends a spec that contract loads.
"""

import copy


def spec_builder(**defaults):
    """A builder of request specs: version 1.0 asking 1 VCPU and 512 MB for
    project "proj", user "usr", changed by ``defaults``, then by the keyword
    arguments of each call. Each call builds a new spec (``defaults``
    copied)."""

    def build(**fields):
        spec = {
            "version": "1.0",
            "resources": {"VCPU": 1, "MEMORY_MB": 512},
            "project_id": "proj",
            "user_id": "usr",
        }
        spec.update(copy.deepcopy(defaults))
        spec.update(fields)
        return spec

    return build


request_spec = spec_builder()


def build_request_spec(instance_uuid, request_id, workload_class="standard", **fields):
    """A one-instance spec consistent with a build request's envelope,
    version 1.0 unless ``fields`` say otherwise."""
    spec = {
        "version": "1.0",
        "request_id": request_id,
        "instance_uuids": [instance_uuid],
        "workload_class": workload_class,
        "resources": {"VCPU": 1},
        "project_id": "p",
        "user_id": "u",
    }
    spec.update(fields)
    return spec


def selected_host(answer):
    """The host uuid a scheduler answer (scheduler.service) selected for
    its one instance; the answer must say it was placed."""
    assert answer["status"] == "placed", answer
    [[selected, *_alternates]] = answer["selections"]["selections"]
    return selected["host_uuid"]
