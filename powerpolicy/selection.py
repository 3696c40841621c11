"""The per-family Sainte-Lague split: which nodes stay in performance.

``performance_set`` is the one function that decides *which* nodes run
uncapped; the policies only decide *how many* (``hp_count``). The controller,
the dry run and the benchmarks all call it, so a plan shown to an operator is
exactly the plan the controller applies.

The algorithm is Joulie's ``PerformanceSet``:

1. group the nodes into hardware families (``joule.vocabulary.family_key``);
2. raise ``hp_count`` to the number of families, cap it at the number of nodes;
3. give every family one slot; each further slot goes to the family with the
   largest ``size / (2 * slots + 1)``, ties to the smaller family key, and a
   family never gets more slots than it has nodes (Sainte-Lague);
4. inside a family, nodes whose current profile is performance come first,
   then node name.

Because a divisor method hands out slots one at a time, the split for k slots
is contained in the split for k + 1 (house monotone), and because current
performance nodes are kept first, a second run at the same demand moves no
node. Nothing depends on the order of the input.
"""

import dataclasses
import decimal
import heapq
import math

from joule import vocabulary


@dataclasses.dataclass(frozen=True)
class Candidate:
    """What the split needs to know of a node.

    ``profile`` is the node's current power profile (its profile trait/label),
    None when it has never been planned.
    """

    name: str
    family: str
    profile: str | None = None
    # How soon the node could take performance work, lowest first (READY_*;
    # the controller sets it only with [power] suspend_enabled): within a
    # family's current and new slots alike, the readier nodes are chosen.
    # 0 for every node keeps the order by name alone.
    readiness: int = 0


# Readiness, with idle nodes suspended: a node already running performance
# work first (it stays uncapped), then one on and empty (takes work now), one
# waking (within its boot), one off or suspending (the controller wakes it for
# the waiting work, minutes), and last one on and running standard work only
# (performance work fits there once that ends, hours later).
READY_RUNNING_PERFORMANCE = 0
READY_ON_IDLE = 1
READY_WAKING = 2
READY_ASLEEP = 3
READY_BUSY_STANDARD = 4


def round_half_away(value):
    """Round to the nearest integer, halves away from zero (Go's math.Round).

    Python's round() rounds halves to even (round(2.5) == 2); the seed's
    arithmetic rounds 2.5 to 3. Floats go through their shortest decimal
    repr first, so 5 * 0.5 is exactly 2.5 and not 2.4999...
    """
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot round {value}")
        value = decimal.Decimal(repr(value))
    value = decimal.Decimal(value)
    return int(value.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def scaled_count(n, fraction):
    """round(n * fraction) computed in decimal, so 0.2 means exactly a fifth."""
    return round_half_away(decimal.Decimal(n) * decimal.Decimal(repr(float(fraction))))


def group_families(nodes):
    """{family: [Candidate, ...]} with each family in selection order.

    Selection order: current performance nodes first, then by readiness
    (with idle nodes suspended: the nodes that can take performance work
    soonest), then by name, so the slots of a family are filled by the nodes
    that are already uncapped.
    """
    members = {}
    for node in nodes:
        members.setdefault(node.family, []).append(node)
    for family_nodes in members.values():
        family_nodes.sort(key=lambda c: (c.profile != vocabulary.PERFORMANCE, c.readiness, c.name))
    return members


class _Claim:
    """A family's claim on the next slot: size / (2 * slots + 1), ties to the smaller key.

    Compared by integer cross-multiplication, so the order is exact (no
    float rounding) and cheap (no Fraction normalisation): one heap entry per
    family, ordered so that the heap's smallest is the most deserving.
    """

    __slots__ = ("size", "divisor", "family")

    def __init__(self, size, slots, family):
        self.size = size
        self.divisor = 2 * slots + 1
        self.family = family

    def __lt__(self, other):
        mine = self.size * other.divisor
        theirs = other.size * self.divisor
        if mine != theirs:
            return mine > theirs
        return self.family < other.family


def family_slots(sizes, hp_count):
    """Sainte-Lague slots per family: {family: slots}.

    :param sizes: {family key: number of nodes}, every size >= 1.
    :param hp_count: requested performance slots; raised to the number of
        families and capped at the number of nodes.
    """
    if not sizes:
        return {}
    total = sum(sizes.values())
    hp_count = min(max(hp_count, len(sizes)), total)
    slots = {family: 1 for family in sizes}
    heap = [_Claim(size, 1, family) for family, size in sizes.items() if size > 1]
    heapq.heapify(heap)
    for _ in range(hp_count - len(sizes)):
        claim = heapq.heappop(heap)
        family = claim.family
        slots[family] += 1
        if slots[family] < sizes[family]:  # a full family claims no more
            heapq.heappush(heap, _Claim(sizes[family], slots[family], family))
    return slots


def performance_set(nodes, hp_count):
    """The names of the nodes to keep in performance (a frozenset).

    :param nodes: iterable of ``Candidate`` (name, family, current profile);
        names must be unique.
    :param hp_count: how many performance slots the policy asks for.
    """
    members = group_families(nodes)
    slots = family_slots({f: len(m) for f, m in members.items()}, hp_count)
    chosen = set()
    for family, count in slots.items():
        chosen.update(c.name for c in members[family][:count])
    return frozenset(chosen)
