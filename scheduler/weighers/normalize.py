"""The one scoring contract: raw weigher values -> [0, 1], then a multiplier.

Nova's min-max normalization: the best raw value maps to 1, the worst to 0,
and when all hosts are equal every host gets 0 (the weigher cannot tell them
apart, so it must not move the ranking). ``reverse`` is for lower-is-better
values. Nowhere else normalizes: the ranking keeps each weigher's bounds
(``bounds``), scales a whole column of hosts at once (``scale_all``) and one
host at a time (``scale``) with these.
"""


def bounds(values, minval=None):
    """(low, high) of ``values``; ``minval``: a fixed lower bound instead of
    the smallest value (nova's resource weighers use 0, so between
    nearly-full hosts 10 and 12 MB free weigh 0.83 and 1.0, not 0 and 1:
    small differences are not magnified)."""
    low = min(values) if minval is None else minval
    return low, max(values)


def scale(value, low, high, reverse=False):
    """``value`` normalized between ``low`` and ``high`` (0 when they meet)."""
    span = high - low
    if span == 0:
        return 0.0
    if reverse:
        return (high - value) / span
    return (value - low) / span


def scale_all(values, low, high):
    """``scale`` of every value of ``values`` (the same numbers, bit for bit),
    in one pass: a ranking of 5,000 hosts scales a column per weigher at
    every rebuild, where a call per value was about 40 % of a rebuild's
    CPU (yappi, the 5k bus benchmark)."""
    span = high - low
    if span == 0:
        return [0.0] * len(values)
    return [(v - low) / span for v in values]


def normalize(values, reverse=False, minval=None):
    """Every value of ``values`` normalized together."""
    if not values:
        return []
    low, high = bounds(values, minval)
    if not reverse:
        return scale_all(values, low, high)
    return [scale(v, low, high, reverse) for v in values]
