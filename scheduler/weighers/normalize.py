"""The one scoring contract: raw weigher values -> [0, 1], then a multiplier.

Nova's min-max normalization: the best raw value maps to 1, the worst to 0,
and when all hosts are equal every host gets 0 (the weigher cannot tell them
apart, so it must not move the ranking). ``reverse`` is for lower-is-better
values. Nowhere else normalizes.
"""


def normalize(values, reverse=False, minval=None):
    """``minval``: a fixed lower bound instead of the smallest value (nova's
    resource weighers use 0, so between nearly-full hosts 10 and 12 MB free
    weigh 0.83 and 1.0, not 0 and 1: small differences are not magnified)."""
    if not values:
        return []
    low = min(values) if minval is None else minval
    high = max(values)
    span = high - low
    if span == 0:
        return [0.0] * len(values)
    if reverse:
        return [(high - v) / span for v in values]
    return [(v - low) / span for v in values]
