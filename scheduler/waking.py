"""Whether a request no awake host can take would fit on sleeping ones.

The ComputeFilter has placement leave out every node that is not on
(suspending, off or waking: powerpolicy.suspend). A request that then finds
no valid host is asked once more, of those nodes: if enough of them could
hold all its instances, it is not a failure but a wait. The scheduler
answers ``waiting`` with the hosts it waits for, by hardware family, and the
conductor holds the request (conductor.wake_waits) while the power
controller wakes nodes for the pending work it sees; the request is
scheduled again, onto nodes that are on, once they are.

Only placement's part of the request is asked here (resources, traits,
aggregates, the spec's own root traits): the other filters see a woken
host when the request is scheduled again, and a request they refuse then
waits until its deadline and fails saying so.
"""

import collections
import logging

from joule import placement_client
from joule import vocabulary
from scheduler import candidate_query

LOG = logging.getLogger(__name__)

# The order sleeping nodes are counted in: the ones nearest to on first.
SLEEPING = (vocabulary.POWER_WAKING, vocabulary.POWER_OFF, vocabulary.POWER_SUSPENDING)

# Pages of candidates read per state: enough for a request of many
# instances, bounded so a failing request never walks a whole cluster.
PAGE_SIZE = 500


def hosts_to_wake(sched, spec, placeable=0):
    """{family: hosts} of sleeping nodes that would hold the instances of
    ``spec`` the hosts that are on cannot (all but ``placeable``); {} when
    they would not (or the ComputeFilter is not enabled, or placement
    cannot say)."""
    routine = candidate_query.routine_forbidden(sched.filters)
    if not routine:
        return {}
    base = candidate_query.query(spec, sched.filters)
    need = spec.num_instances - placeable
    chosen = collections.Counter()
    try:
        for state in SLEEPING:
            for _root, fits, family in _fitting(sched.client, base, routine, state, spec):
                chosen[family] += 1
                need -= fits
                if need <= 0:
                    return dict(chosen)
    except placement_client.PlacementError as exc:
        if not (exc.status == 400 and "No such trait" in (exc.detail or "")):
            LOG.warning("%s: sleeping hosts not asked: %s", spec.request_id, exc)
    return {}


def describe(wake):
    """'waiting for 2 host(s) of family cpu:X and 1 of family gpu:Y to wake'."""
    parts = [f"{n} host(s) of family {family}" for family, n in sorted(wake.items())]
    return f"waiting for {' and '.join(parts)} to wake"


def _fitting(client, base, routine, state, spec):
    """(root, instances of ``spec`` it holds, family) of the candidates in
    ``state``."""
    trait = vocabulary.POWER_STATE_TRAITS[state]
    query = [(k, v) for k, v in base if k != "root_required"]
    required = [
        t
        for k, v in base
        if k == "root_required"
        for t in v.split(",")
        if t.lstrip("!") not in routine
    ]
    query.append(("root_required", ",".join([*required, trait])))
    amounts = collections.Counter(spec.resources)
    for group in spec.groups.values():
        amounts.update(group.resources)
    for page in client.candidate_pages(query, PAGE_SIZE, node_data=True):
        nodes = page.get("nodes") or {}
        free = {}
        for rp, summary in (page.get("provider_summaries") or {}).items():
            root = summary.get("root_provider_uuid") or rp
            left = free.setdefault(root, collections.Counter())
            for rc, entry in (summary.get("resources") or {}).items():
                left[rc] += entry["capacity"] - entry["used"]
        for root, left in free.items():
            fits = min((left[rc] // n for rc, n in amounts.items() if n > 0), default=1)
            if fits > 0:
                family = (nodes.get(root) or {}).get("family") or vocabulary.UNKNOWN_FAMILY
                yield root, int(fits), family
        break  # one page: a request waits for the hosts it names, not a census
