"""Alternates: where the conductor retries an instance whose build failed.

Nova's rule: the next hosts of the ranked list in the selected host's cell
(a build moves within one cell only) and availability zone (an instance does
not change zone because its first host failed), excluding hosts already selected for
the request and hosts that lost a claim race, at most ``max_attempts - 1``.
Each carries its own, unclaimed allocation request: nobody knows yet whether
an alternate will be used, so claiming it now would waste capacity.
"""


def pick(ranked_hosts, selected, exclude, max_attempts, usable=None):
    """Alternate (host, allocation_request) pairs for ``selected``.

    :param ranked_hosts: hosts best first.
    :param exclude: uuids never to offer (selected for other instances, lost).
    :param usable: ``usable(host)`` -> the allocation request of this request
        that still fits the host, or None (default: the host's own
        ``usable_request``; a batch passes one per request of the batch).
    """
    wanted = max_attempts - 1
    out = []
    if wanted <= 0:
        return out
    for host in ranked_hosts:
        if host.uuid == selected.uuid or host.uuid in exclude:
            continue
        if host.cell != selected.cell or host.zone != selected.zone:
            continue
        areq = host.usable_request() if usable is None else usable(host)
        if areq is None:
            continue
        out.append((host, areq))
        if len(out) >= wanted:
            break
    return out
