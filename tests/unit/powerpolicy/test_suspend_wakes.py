"""Which sleeping nodes the power controller wakes for pending work."""

import types

from joule import vocabulary
from powerpolicy import suspend

OFF_TRAIT = vocabulary.POWER_STATE_TRAITS[vocabulary.POWER_OFF]


class _Placement:
    """Pending work of one shape, and sleeping nodes that each fit it once."""

    def __init__(self, off_roots):
        self.off_roots = off_roots

    def list_build_requests(self, **_query):
        spec = {"resources": {"VCPU": 4}, "workload_class": vocabulary.STANDARD}
        return [{"spec": spec, "workload_class": vocabulary.STANDARD}]

    def candidate_pages(self, query, _page_size, node_data=False):
        required = dict(query)["root_required"]
        if OFF_TRAIT not in required.split(","):
            return  # nothing that is on or waking fits
        summaries = {
            root: {"root_provider_uuid": root, "resources": {"VCPU": {"capacity": 8, "used": 4}}}
            for root in self.off_roots
        }
        yield {"provider_summaries": summaries}


def test_among_equally_fitting_sleeping_nodes_the_first_by_name_is_woken():
    # Uuids sort the other way round from names: a uuid is random per
    # deployment, so a tie broken by it woke different nodes in two runs.
    nodes = {"ffff-1": "node-a", "0000-2": "node-b"}
    states = suspend.PowerStates(
        types.SimpleNamespace(suspend_rate=10, resume_rate=10),
        _Placement(list(nodes)),
        driver=None,
        clock=lambda: 0.0,
    )
    by_uuid = {
        uuid: {"uuid": uuid, "name": name, "family": "cpu:x"} for uuid, name in nodes.items()
    }
    assert list(states.wanted_wakes(by_uuid)) == ["ffff-1"]
