"""One node agent: discover, register, then a pass every report_interval.

A pass:

1. re-discover and re-register when ``rediscover_interval`` has passed (or
   placement lost the node record): only differences are written;
2. measure power, apply the caps of the twin the agent knows (the files
   are written only where they differ, so a steady node sees no writes and
   a value changed behind the agent's back is put back);
3. heartbeat with that status; placement answers with the twin;
4. when the twin's spec changed (the power controller's tick), apply it at
   once and heartbeat again with the new status, so the twin says what is
   in force within the same pass.

Placement being unreachable costs a pass, never the process: the caps in
force stay, and the next pass tries again.
"""

import logging
import time

from joule import placement_client
from node_agent import discovery
from node_agent import power as power_mod
from node_agent import provider_config
from node_agent import register as register_mod

LOG = logging.getLogger(__name__)


def spec_of(twin):
    """The part of a twin the agent acts on."""
    if twin is None:
        return None
    return (
        twin.get("generation"),
        twin.get("profile"),
        twin.get("cpu_cap_watts"),
        twin.get("gpu_cap_watts"),
    )


def discover(opts, nvml=None):
    """The node under ``[agent]`` ``opts`` (NVML only when ``opts.gpus``)."""
    if not opts.gpus:
        node = discovery.discover(opts.procfs_root, opts.sysfs_root, nvml=_NoNvml())
        return node
    return discovery.discover(opts.procfs_root, opts.sysfs_root, nvml=nvml)


class _NoNvml:
    def nvmlInit(self):
        raise RuntimeError("disabled by [agent] gpus = false")


def load_plan(node, opts):
    """The registration Plan, with the provider config file when one is set.

    :raise provider_config.ProviderConfigError: the file is not valid.
    """
    inventories, traits = {}, []
    if opts.provider_config:
        inventories, traits = provider_config.load(opts.provider_config, opts.host)
    return register_mod.plan(node, opts, inventories, traits)


class Agent:
    def __init__(self, conf, client, nvml=None, metrics=None, clock=time.monotonic):
        self.conf = conf
        self.opts = conf.agent
        self.client = client
        self.nvml = nvml
        self.metrics = metrics
        self.clock = clock
        self.registrar = register_mod.Registrar(client, self.opts)
        self.node = None
        self.power = None
        self.twin = None
        self.status = None
        # With the compute service: a callable giving its instance counts
        # (node_agent.compute.Compute.counts), sent in every heartbeat.
        self.instances = None
        self._registered_at = None
        self._refresh_failing = None
        self.last_result = None

    @property
    def uuid(self):
        return self.registrar.uuid

    def _nvml(self):
        return self.nvml if self.nvml is not None else discovery.pynvml

    def refresh(self):
        """Discover and register; returns the registration Result."""
        node = discover(self.opts, self.nvml)
        if self.node is None or node != self.node:
            old = self.power
            self.node = node
            self.power = power_mod.Power(
                node, self.opts.cpu_nominal_watts, nvml=self._nvml(), clock=self.clock
            )
            if old is not None:
                self.power.keep_samples(old)
        result = self.registrar.register(load_plan(node, self.opts))
        if self.metrics is not None:
            for what in result.writes:
                self.metrics.registration_writes.labels(what).inc()
        self._registered_at = self.clock()
        self.last_result = result
        return result

    def _refresh_or_carry_on(self):
        """Refresh; once registered, a failed refresh (the provider config
        edited into an invalid file, placement refusing one write, /proc
        unreadable for a moment) is logged and the pass goes on to its
        heartbeat with what the agent knows: liveness must not hang on
        registration, or a typo makes a healthy node look down. The refresh
        is tried again next pass. Placement unreachable still ends the pass
        (the heartbeat could not go either)."""
        try:
            self.refresh()
        except placement_client.NOT_THERE:
            raise
        except (
            placement_client.PlacementError,
            discovery.DiscoveryError,
            provider_config.ProviderConfigError,
        ) as exc:
            if self.uuid is None or self.power is None:
                raise  # never registered: nothing to heartbeat for
            text = f"re-registration of {self.opts.host} failed (heartbeats go on): {exc}"
            if text != self._refresh_failing:
                LOG.error("%s", text)
                self._refresh_failing = text
            return
        self._refresh_failing = None

    def _due(self):
        if self._registered_at is None:
            return True
        every = self.opts.rediscover_interval
        return bool(every) and self.clock() - self._registered_at >= every

    def _heartbeat(self, status):
        try:
            try:
                answer = self.client.heartbeat(self.uuid, status)
            except placement_client.BadRequest as exc:
                if status is None:
                    raise
                # A status placement will not store (a reading past its bounds,
                # say) must not make a healthy node look dead: the liveness
                # goes through without it, and the refusal is logged.
                LOG.warning("placement refused the twin status (%s): heartbeat without it", exc)
                answer = self.client.heartbeat(self.uuid, None)
        except placement_client.NotFound as exc:
            if exc.code == "placement.node.not_found":
                # The node record went (an operator deleted it): register again.
                LOG.warning("placement has no node record for %s: registering again", self.uuid)
                self._registered_at = None
            elif exc.code == "placement.resource_provider.not_found":
                # The provider itself went: find or create it again by name
                # (nova's report client drops its cached provider the same way).
                LOG.warning("placement has no provider %s: registering again", self.uuid)
                self.registrar.uuid = None
                self._registered_at = None
            if self.metrics is not None:
                self.metrics.heartbeats.labels("error").inc()
            raise
        except placement_client.PlacementError:
            if self.metrics is not None:
                self.metrics.heartbeats.labels("error").inc()
            raise
        if self.metrics is not None:
            self.metrics.heartbeats.labels("ok").inc()
            self.metrics.last_heartbeat.set(time.time())
        return answer

    def _apply(self, twin, watts):
        self.status = self.power.status(twin, watts)
        if self.status is not None and self.instances is not None:
            self.status["instances"] = self.instances()
        if self.metrics is not None and self.status is not None:
            self.metrics.record_status(self.status)
        return self.status

    def run_pass(self):
        """One pass (see the module docstring).

        :raise PlacementError: placement failed; the caps in force stay.
        :raise discovery.DiscoveryError, provider_config.ProviderConfigError.
        """
        if self._due():
            self._refresh_or_carry_on()
        watts = self.power.measure()
        status = self._apply(self.twin, watts)
        answer = self._heartbeat(status)
        twin = answer.get("twin")
        if spec_of(twin) != spec_of(self.twin):
            if twin is not None:
                LOG.info(
                    "twin generation %s: profile %s, CPU cap %s W, GPU cap %s W",
                    twin.get("generation"),
                    twin.get("profile"),
                    twin.get("cpu_cap_watts"),
                    twin.get("gpu_cap_watts"),
                )
            self.twin = twin
            status = self._apply(twin, watts)
            if status is not None:
                self._heartbeat(status)
        else:
            self.twin = twin
        return self.status

    def run_forever(self, stop_event):
        """Pass every report_interval until ``stop_event`` is set."""
        interval = self.opts.report_interval
        failing = None
        while not stop_event.is_set():
            started = self.clock()
            try:
                self.run_pass()
                if failing:
                    LOG.info("placement answers again")
                failing = None
            except placement_client.PlacementError as exc:
                text = str(exc)
                if text != failing:
                    LOG.error("pass failed, retrying every %ss: %s", interval, text)
                failing = text
            except Exception:  # keep the agent alive; the next pass starts afresh
                LOG.exception("pass failed, retrying in %ss", interval)
                failing = None
            stop_event.wait(max(0.0, interval - (self.clock() - started)))
