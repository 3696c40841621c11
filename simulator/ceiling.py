"""The most that packing and suspending could save from a simulated day.

Suspend (issue 26) can take from a day only the idle floor of nodes that
the day's work does not need. How many a family needs at a given moment
has a lower bound that no placement, however tight, can beat: the running
allocations of the family's work, summed per resource class, divided by
one node's capacity and rounded up, the largest over the classes (every
family of the inventories is one hardware record, so its nodes are the
same size). Every awake node beyond that bound could at best be off,
drawing the BMC's few watts instead of its idle floor.

``PackingCeiling`` keeps that figure, in watts, as allocations and power
states change; the engine integrates it beside the IT energy. The result
is an upper bound on what packing within each family and suspending could
have saved from the same work, as if running work moved for free and
nodes booted at once: moving work from one node to another is taken to
move its dynamic power unchanged, the host curves being close to linear
above idle. It is a measure of the day, never part of its energy.

It also keeps the share of each resource class that the day's work held,
time-weighted, which says the same thing another way: a day whose work
holds 90 % of the GPUs leaves at most 10 % of the GPU nodes to sleep.
"""

import math

RESOURCES = ("VCPU", "MEMORY_MB", "PGPU")


class _Family:
    __slots__ = ("capacity", "nodes", "awake", "idle_watts", "used")

    def __init__(self, capacity, idle_watts):
        self.capacity = capacity  # resource class -> one node's amount
        self.nodes = 0
        self.awake = 0  # nodes not off (on, suspending or waking draw their idle floor)
        self.idle_watts = idle_watts
        self.used = dict.fromkeys(RESOURCES, 0)

    def needed(self):
        most = 0
        for rc, amount in self.used.items():
            size = self.capacity[rc]
            if amount > 0 and size > 0:
                most = max(most, math.ceil(amount / size))
        return most


class PackingCeiling:
    def __init__(self, off_watts):
        self.off_watts = off_watts
        self._families = {}
        self._watts = 0.0
        self._stale = False  # allocations or power states changed since _watts
        self.energy_j = 0.0
        self._used_seconds = dict.fromkeys(RESOURCES, 0.0)  # integral of the amounts held
        self._seconds = 0.0

    def add_node(self, family, capacity, idle_watts):
        """Count one node, awake. All nodes of a family have one capacity."""
        entry = self._families.get(family)
        if entry is None:
            entry = self._families[family] = _Family(dict(capacity), idle_watts)
        entry.nodes += 1
        entry.awake += 1
        self._stale = True

    def allocate(self, family, amounts, sign=1):
        """Work of ``amounts`` (resource class -> amount) started (1) or ended (-1)."""
        used = self._families[family].used
        for rc in RESOURCES:
            used[rc] += sign * amounts[rc]
        self._stale = True

    def power_changed(self, family, was_off, is_off):
        if was_off != is_off:
            self._families[family].awake += 1 if was_off else -1
            self._stale = True

    @property
    def watts(self):
        """The idle floor of the awake nodes no placement needs, less off power."""
        if self._stale:
            # Once per interval, not per change: a job's start changes its
            # family once per instance, and only the interval's end reads it.
            self._watts = sum(
                max(0, e.awake - e.needed()) * max(0.0, e.idle_watts - self.off_watts)
                for e in self._families.values()
            )
            self._stale = False
        return self._watts

    def advance(self, seconds):
        if seconds <= 0:
            return
        self.energy_j += self.watts * seconds
        self._seconds += seconds
        for entry in self._families.values():
            for rc in RESOURCES:
                self._used_seconds[rc] += seconds * entry.used[rc]

    def held_share(self):
        """resource class -> the time-weighted share of the cluster's amount held by work."""
        share = dict.fromkeys(RESOURCES, 0.0)
        for rc in RESOURCES:
            capacity = sum(e.capacity[rc] * e.nodes for e in self._families.values())
            if capacity and self._seconds > 0:
                share[rc] = self._used_seconds[rc] / (capacity * self._seconds)
        return share
