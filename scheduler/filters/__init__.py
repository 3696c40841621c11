"""Host filters: each drops hosts that must not take the request, with a reason.

A filter is a class with a ``name``, a ``reason`` (one sentence shown to the
operator when it removes hosts), ``host_passes(host, spec) -> bool`` and
``node_fields(spec)``: the node-data fields of ``HostState`` it reads for
that spec (the scheduler asks placement for node data only when some enabled
filter, weigher or the alternates need a field); ``spec`` is the request's
``scheduler.request_state.RequestState`` (the spec's fields plus what the
worker looked up for it, such as the server group). A filter may also have
``root_forbidden_traits(spec)``: root-provider traits of hosts it would
always remove, which placement then leaves out of the candidates.
``run_filters`` applies the configured chain in order and records, per filter,
how many hosts went in, how many it removed and why: the explanation a "no
valid host" error carries.
"""

import logging

from scheduler.filters.availability_zone import AvailabilityZoneFilter
from scheduler.filters.cell import CellFilter
from scheduler.filters.compute import ComputeFilter
from scheduler.filters.hints import DifferentHostFilter
from scheduler.filters.hints import ForceHostsFilter
from scheduler.filters.hints import SameHostFilter
from scheduler.filters.joulie import JoulieFilter
from scheduler.filters.node_selector import NodeSelectorFilter
from scheduler.filters.server_group import ServerGroupAffinityFilter
from scheduler.filters.server_group import ServerGroupAntiAffinityFilter

LOG = logging.getLogger(__name__)

REGISTRY = {cls.name: cls for cls in (ComputeFilter, ForceHostsFilter, CellFilter,
                                      AvailabilityZoneFilter, NodeSelectorFilter, JoulieFilter,
                                      ServerGroupAntiAffinityFilter,
                                      ServerGroupAffinityFilter, SameHostFilter,
                                      DifferentHostFilter)}


class UnknownFilter(ValueError):
    pass


def load(names):
    """Filter instances for ``names``, in order; a bad name fails at start-up."""
    out = []
    for name in names:
        cls = REGISTRY.get(name)
        if cls is None:
            raise UnknownFilter(
                f"unknown filter {name!r} in [filter_scheduler] enabled_filters; "
                f"known: {sorted(REGISTRY)}")
        out.append(cls())
    return out


def run_filters(hosts, spec, filters):
    """Apply ``filters`` in order; return (remaining hosts, per-filter records)."""
    records = []
    for flt in filters:
        before = len(hosts)
        # hot: runs per candidate host per request; no logging inside.
        hosts = [h for h in hosts if flt.host_passes(h, spec)]
        removed = before - len(hosts)
        records.append({"name": flt.name, "before": before, "after": len(hosts),
                        "removed": removed, "reason": flt.reason})
        LOG.debug("filter %s: %d -> %d hosts", flt.name, before, len(hosts))
        if not hosts:
            LOG.info("filter %s removed all remaining candidates of %s", flt.name,
                     spec.request_id)
            break
    return hosts, records


def add_records(total, records):
    """Sum per-filter records of one batch of hosts into ``total`` (by filter
    name, in chain order); a filter the batch never reached adds nothing."""
    by_name = {r["name"]: r for r in total}
    for rec in records:
        have = by_name.get(rec["name"])
        if have is None:
            have = {"name": rec["name"], "before": 0, "after": 0, "removed": 0,
                    "reason": rec["reason"]}
            by_name[rec["name"]] = have
            total.append(have)
        for key in ("before", "after", "removed"):
            have[key] += rec[key]
    return total
