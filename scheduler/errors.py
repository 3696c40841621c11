"""What can go wrong while scheduling, and placement's failures said as such.

Every stage raises these (never a client exception), so the RPC endpoint and
the command line map outcomes in one place: NoValidHost (nothing fits, with
what each filter removed and why), ConsumerInUse (the instance already holds
allocations), Expired (the caller's deadline passed: it gave the request
up), PlacementUnavailable (placement could not be reached or
refused our credentials: nothing of the request stays claimed) and
SchedulerError for the rest.
"""

import contextlib

from joule import placement_client


class SchedulerError(Exception):
    """Scheduling did not complete; ``report`` is the request's report."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


class NoValidHost(SchedulerError):
    """Not every instance fits; ``placeable``: how many did on the hosts
    seen (nothing of them stays claimed)."""

    def __init__(self, message, report=None, placeable=0):
        super().__init__(message, report)
        self.placeable = placeable


class WaitingForWake(NoValidHost):
    """No host that is on fits, but enough sleeping ones would once woken
    (scheduler.waking): the caller holds the request instead of failing it.
    ``wake``: {hardware family: hosts of it the request waits for}."""

    def __init__(self, message, wake, report=None):
        super().__init__(message, report)
        self.wake = dict(wake)


class ConsumerInUse(SchedulerError):
    """The instance already holds allocations: someone else (another
    conductor resuming it, an earlier attempt) claimed it. Nothing was changed."""


class Expired(SchedulerError):
    """The caller's deadline passed before this request was answered: the
    caller has given it up. Nothing of it stays claimed."""


class PlacementUnavailable(SchedulerError):
    """Placement could not be reached; the request's claims were released."""


# What says "placement is not there for us" rather than "placement said no".
UNREACHABLE = placement_client.NOT_THERE


@contextlib.contextmanager
def asking_placement(what):
    """Placement's failures inside the block as scheduler errors: unreachable
    (or our credentials refused) is PlacementUnavailable, any other refusal
    a SchedulerError that starts with ``what``."""
    try:
        yield
    except UNREACHABLE as exc:
        raise PlacementUnavailable(str(exc)) from exc
    except placement_client.PlacementError as exc:
        raise SchedulerError(f"{what}: {exc}") from exc
