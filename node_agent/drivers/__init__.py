"""Compute drivers of the node agent: what runs an instance on this node.

A driver is loaded by name from the ``joule.agent.drivers`` entry points
(``[agent] driver``), as nova loads its virt driver and Nomad its task
drivers. The agent's compute service (node_agent.compute) owns the
records; a driver is asked to:

* ``start(instance)``: start it, or raise StartFailed with why (the build
  then moves to an alternate host); returns once it runs (or already ended
  well within its start window);
* ``poll(instance)``: whether it still runs; when it ended, fill in
  ``state``, ``exit_status`` and ``reason`` and return True;
* ``stop(instance, grace)``: end it (SIGTERM, SIGKILL after ``grace``
  seconds) and return once nothing of it is left;
* ``recover(instance)``: after an agent restart, whether the instance of
  this record still runs (True), or has ended (its end filled in, False).
"""

from stevedore import driver as stevedore_driver

NAMESPACE = "joule.agent.drivers"


class StartFailed(Exception):
    """The instance could not be started here; the message says why."""


class Driver:
    name = "abstract"

    def start(self, instance):  # pragma: no cover - interface
        raise NotImplementedError

    def poll(self, instance):  # pragma: no cover - interface
        raise NotImplementedError

    def stop(self, instance, grace):  # pragma: no cover - interface
        raise NotImplementedError

    def recover(self, instance):  # pragma: no cover - interface
        raise NotImplementedError

    def limits(self, instance):
        """What the driver enforces for ``instance`` (None: nothing)."""
        return None


class UnknownDriver(Exception):
    pass


def load(name, conf, store):
    """The driver ``name`` made for this agent's ``conf`` and ``store``.

    :raise UnknownDriver: no entry point of that name.
    """
    try:
        manager = stevedore_driver.DriverManager(
            NAMESPACE, name, invoke_on_load=True, invoke_args=(conf, store)
        )
    except Exception as exc:  # stevedore raises NoMatches or the plugin's error
        raise UnknownDriver(f"[agent] driver {name!r} cannot be loaded: {exc}") from None
    return manager.driver
