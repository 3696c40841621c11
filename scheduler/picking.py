"""Stage 4: a host for one instance, from the ranking, with assumed usage.

Nova's herding defence: the hosts tied at the best weight are shuffled, then
the pick is at random among the ``host_subset_size`` best, so concurrent
workers ranking the same cluster do not all take the same host. The picked
host's capacity is consumed in the walk's host states at once (assumed
usage), so the next instance of this request, or of a request batched with
it, sees what this one took; placement checks every claim (stage 5).

A host fits a request when one of its allocation requests fits what is left
of it. Requests batched together share a walk asked for their smallest
amounts (``merge``): a host's allocation request is then checked, and
claimed, with the request's own amounts of the unnumbered group.
"""


def fitting(host, spec, merge):
    """The first of ``host``'s allocation requests that fits ``spec`` now, as
    the walk returned it (``merge``: checked with the spec's own amounts, not
    yet retargeted to them: a decision looks at many hosts and takes one)."""
    if not merge:
        return host.usable_request()
    wanted = spec.resources
    providers = host.providers
    for areq in host.allocation_requests:
        for rp, entry in areq["allocations"].items():
            have = providers.get(rp)
            if have is None:
                continue  # a sharing provider outside the tree: placement decides
            if any(
                (cap_used := have.get(rc)) is not None
                and cap_used[1] + wanted.get(rc, amount) > cap_used[0]
                for rc, amount in entry["resources"].items()
            ):
                break
        else:
            return areq
    return None


def retarget(areq, resources):
    """``areq`` with the unnumbered group's amounts set to ``resources``."""
    return {
        **areq,
        "allocations": {
            rp: {
                **entry,
                "resources": {
                    rc: resources.get(rc, amount) for rc, amount in entry["resources"].items()
                },
            }
            for rp, entry in areq["allocations"].items()
        },
    }


def usable_for(host, spec, merge):
    """The allocation request of ``spec`` on ``host`` now, or None."""
    areq = fitting(host, spec, merge)
    if areq is not None and merge:
        return retarget(areq, spec.resources)
    return areq


def choose(available, rng, subset, shuffle_ties=True, prefers=None):
    """One of ``available`` ([(weight, allocation request, host)], best
    first): the best-weight ties shuffled, then at random among the
    ``subset`` best. ``prefers`` (a host uuid -> bool, or None): the ties
    this worker prefers go first (scheduler.host_cache.Share), so workers
    drawing among the same ties do not race for one."""
    if shuffle_ties:
        best = available[0][0]
        ties = 1
        while ties < len(available) and available[ties][0] == best:
            ties += 1
        if ties > 1:
            head = available[:ties]
            rng.shuffle(head)
            if prefers is not None:
                head.sort(key=lambda item: not prefers(item[2].uuid))  # stable
            available = head + available[ties:]
    return rng.choice(available[:subset])
