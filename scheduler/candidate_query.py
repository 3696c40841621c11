"""What one request asks placement for: only what the scheduler can use.

* The spec's own query (resources, traits, aggregates, groups), plus
  ``root_required=!<trait>`` for every root trait an enabled filter would
  remove anyway: a performance request never downloads an eco or draining
  host only to filter it out.
* Node data (``node_data=true``) only when an enabled filter, weigher or the
  alternates read a node field for this spec; without it a page is provider
  summaries only.
* A start point (``page_start``): each walk starts at a random point of the
  root-id range and wraps around, so concurrent workers read different hosts
  first and a capped walk does not fill the cluster in id order, while a walk
  read to its end still sees every root once.
"""

import random

# Alternates stay in the selected host's cell (a build moves within a cell).
ALTERNATES_FIELDS = frozenset({"cell"})

# What a filter or weigher that declares nothing is taken to read: all of it.
EVERY_FIELD = frozenset({"*"})

# Decimal places of page_start: far finer than any cluster's id range.
START_DIGITS = 6


def node_fields(spec, filters, weighers, max_attempts):
    """The node-data fields some enabled stage reads for ``spec`` (a set)."""
    fields = set()
    for stage in [*filters, *(weigher for weigher, _multiplier in weighers)]:
        declared = getattr(stage, "node_fields", None)
        fields |= declared(spec) if declared is not None else EVERY_FIELD
    if max_attempts > 1:
        fields |= ALTERNATES_FIELDS
    return fields


def excluded_by_filters(spec, filters):
    """[(filter, sorted root traits)] placement leaves out for the enabled
    filters, minus traits the spec itself requires (such a request meets the
    filter instead, which then explains what it removed)."""
    required = set(spec.required)
    for group in spec.groups.values():
        required |= set(group.required)
    out = []
    for flt in filters:
        declared = getattr(flt, "root_forbidden_traits", None)
        traits = sorted(declared(spec) - required) if declared is not None else []
        if traits:
            out.append((flt, traits))
    return out


def root_forbidden(spec, filters):
    """Root traits of hosts an enabled filter removes for ``spec``."""
    return {t for _flt, traits in excluded_by_filters(spec, filters) for t in traits}


def routine_forbidden(filters):
    """Root traits every request forbids (filters that do not explain
    their exclusion: the ComputeFilter's sleeping nodes)."""
    out = set()
    for flt in filters:
        declared = getattr(flt, "root_forbidden_traits", None)
        if declared is not None and not getattr(flt, "explain_exclusion", True):
            out |= set(declared(None))
    return out


def explain_excluded(spec, filters):
    """What placement left out for the filters, in the words of a NoValidHost."""
    # A filter whose exclusion every request carries (the ComputeFilter's
    # sleeping nodes) says nothing a report of each request should repeat.
    return [
        f"{flt.name} had placement leave out hosts with {', '.join(traits)} ({flt.reason})"
        for flt, traits in excluded_by_filters(spec, filters)
        if getattr(flt, "explain_exclusion", True)
    ]


def query(spec, filters):
    """(key, value) pairs of GET /allocation_candidates for ``spec``."""
    params = list(spec.candidate_query())
    forbidden = root_forbidden(spec, filters)
    if forbidden:
        params.append(("root_required", ",".join("!" + t for t in sorted(forbidden))))
    return params


def start_point(rng=None, request_id=None):
    """A page_start value: a uniform fraction of the root-id range, as text
    placement accepts (``0.`` and START_DIGITS digits, always below 1).

    Without ``rng`` it is drawn from the request id, like the scheduler's
    tie-breaks: request ids are unique, so walks still start all over the
    id space, and a replay of the same requests reads hosts in the same order."""
    if rng is None:
        rng = random.Random(f"walk-start/{request_id}")
    value = rng.random()
    return f"0.{int(value * 10**START_DIGITS):0{START_DIGITS}d}"
