"""What a request needs from placement besides its candidates.

Its server group (``GET /server_groups/{uuid}``), the providers of the
instances its ``same_host`` / ``different_host`` hints name, and the traits
its query forbids: placement refuses a query naming an unknown trait, even
to forbid it (a cluster where no node ever was eco has no
CUSTOM_POWER_PROFILE_ECO yet), so they are created first, once per process.
"""

import threading

from joule import placement_client
from scheduler import server_groups
from scheduler.errors import SchedulerError
from scheduler.errors import asking_placement

HINTS = ("same_host", "different_host")


def load_group(client, spec):
    """The view of ``spec``'s server group, or None when it names none."""
    if spec.server_group is None:
        return None
    with asking_placement(f"server group {spec.server_group}"):
        try:
            return server_groups.GroupView.load(client, spec.server_group)
        except placement_client.NotFound:
            raise SchedulerError(
                f"request {spec.request_id} names server group "
                f"{spec.server_group}, which placement does not know"
            ) from None


def hint_providers(client, spec):
    """{hint name: {provider uuid}} of the instances the spec's hints name."""
    out = {}
    hints = spec.scheduler_hints
    for name in HINTS:
        instances = getattr(hints, name)
        if not instances:
            continue
        providers = set()
        for instance in instances:
            with asking_placement(f"{name} hint: allocations of {instance}"):
                allocations, _generation = client.get_allocations(instance)
            providers.update(allocations)
        out[name] = providers
    return out


class KnownTraits:
    """The traits this process knows exist in placement (shared by its
    threads: creating one is idempotent, so a race costs a request)."""

    def __init__(self):
        self._names = set()
        self._lock = threading.Lock()

    def ensure(self, client, names, again=False):
        """Create those of ``names`` not known to exist; ``again``: forget
        them first (placement said one is gone)."""
        with self._lock:
            if again:
                self._names -= set(names)
            missing = sorted(set(names) - self._names)
        for name in missing:
            with asking_placement(f"could not create trait {name}"):
                client.ensure_trait(name)
            with self._lock:
                self._names.add(name)
