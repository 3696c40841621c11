"""Applying the twin's caps on the node, and measuring its power.

The twin's spec is the only input: ``cpu_cap_watts`` (the whole node's CPU
budget) and ``gpu_cap_watts`` (per GPU). The agent applies what it says and
nothing else; a cap of null means uncapped (the hardware's maximum). A node
without a twin is left as it is.

CPU, in order:

* RAPL: the cap is split evenly over the package zones that have
  ``constraint_0_power_limit_uw`` and written there (microwatts), each
  checked against the zone's ``constraint_0_min_power_uw`` /
  ``constraint_0_max_power_uw``.
* cpufreq (no RAPL limit: a cpufreq-only node, or AMD whose RAPL zones only
  count energy): with ``[agent] cpu_nominal_watts`` N, every CPU's
  ``scaling_max_freq`` becomes cpuinfo_max_freq x cap / N, within the CPU's
  range. Joulie's agent steers the frequency from measured power instead;
  an open-loop ratio needs no power counter (cpufreq-only nodes have none)
  and gives the same frequency for the same cap on every pass.
* neither: ``unsupported``, said in the status and logged once.

GPUs: NVML's power management limit (milliwatts), checked against its
constraints; null restores the default limit.

Each pass writes only values that differ from what the files (or NVML) hold,
so a steady node sees no writes. The status says, per part, the method, the
result (``applied``, ``uncapped``, ``unsupported``, ``out_of_range``,
``failed``), the requested and applied watts, why when it could not, and the
measured watts: RAPL ``energy_uj`` deltas between passes (wrapping at
``max_energy_range_uj``), NVML's power usage.
"""

import logging
import os
import time

LOG = logging.getLogger(__name__)

RAPL, CPUFREQ, NVML, NONE = "rapl", "cpufreq", "nvml", "none"
APPLIED, UNCAPPED, UNSUPPORTED, OUT_OF_RANGE, FAILED = (
    "applied",
    "uncapped",
    "unsupported",
    "out_of_range",
    "failed",
)
_LIMIT = "constraint_0_power_limit_uw"
_EPS = 1e-6


def _read_int(path):
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


# path -> (value last written, what the file read back after it). The kernel
# rounds a RAPL limit to its power unit (often 125,000 uW) and intel_pstate a
# frequency to its step, so the file rarely reads back what was written; a
# steady node must not rewrite it every pass.
_WRITTEN = {}


def _write(path, value):
    """Write ``value`` unless the file holds it (or what the kernel made of it
    the last time we wrote it); True when written."""
    current = _read_int(path)
    if current == value or _WRITTEN.get(path) == (value, current):
        return False
    with open(path, "w") as fh:
        fh.write(str(value))
    _WRITTEN[path] = (value, _read_int(path))
    return True


def _why(exc, path):
    if isinstance(exc, PermissionError):
        return f"permission denied writing {path}"
    return f"cannot write {path}: {exc.strerror or exc}"


def _part(method, result, requested, applied=None, reason=None, domains=None):
    out = {
        "method": method,
        "result": result,
        "requested_watts": requested,
        "applied_watts": applied,
        "measured_watts": None,
        "reason": reason,
        "domains": domains or [],
    }
    return out


class Power:
    """Caps and measurements of one node (a ``discovery.Node``)."""

    def __init__(self, node, nominal_watts=None, nvml=None, clock=time.monotonic, dry_run=False):
        self.node = node
        self.nominal_watts = nominal_watts
        self.nvml = nvml
        self.clock = clock
        self.dry_run = dry_run
        self.planned = []  # (path or device, value) a dry run would write
        self._energy = {}  # zone -> (energy_uj, time)
        self._said = set()

    def keep_samples(self, other):
        """Carry another Power's energy samples over (a re-discovered node)."""
        self._energy = dict(other._energy)
        self._said = set(other._said)

    def _once(self, level, message):
        if message not in self._said:
            self._said.add(message)
            LOG.log(level, "%s", message)

    def _set(self, path, value):
        if self.dry_run:
            if _read_int(path) != value:
                self.planned.append((path, value))
            return False
        return _write(path, value)

    # -- CPU -------------------------------------------------------------------

    def _rapl(self, cap):
        zones = self.node.rapl_cappable
        per_zone = None if cap is None else cap / len(zones)
        values, domains = [], []
        for d in zones:
            if per_zone is None:
                if d.max_uw is None:
                    return _part(
                        RAPL,
                        FAILED,
                        cap,
                        reason=f"{d.zone} has no constraint_0_max_power_uw to uncap to",
                    )
                values.append((d, d.max_uw))
                continue
            uw = int(round(per_zone * 1e6))
            if d.max_uw is not None and uw > d.max_uw:
                return _part(
                    RAPL,
                    OUT_OF_RANGE,
                    cap,
                    reason=f"{per_zone:g} W per package is above {d.zone}'s maximum "
                    f"{d.max_uw / 1e6:g} W",
                )
            if d.min_uw is not None and uw < d.min_uw:
                return _part(
                    RAPL,
                    OUT_OF_RANGE,
                    cap,
                    reason=f"{per_zone:g} W per package is below {d.zone}'s minimum "
                    f"{d.min_uw / 1e6:g} W",
                )
            values.append((d, uw))
        for d, uw in values:
            path = os.path.join(d.path, _LIMIT)
            try:
                self._set(path, uw)
            except OSError as exc:
                return _part(RAPL, FAILED, cap, reason=_why(exc, path))
            domains.append({"name": d.name, "limit_watts": uw / 1e6, "measured_watts": None})
        applied = sum(x["limit_watts"] for x in domains)
        return _part(RAPL, UNCAPPED if cap is None else APPLIED, cap, applied, domains=domains)

    def _cpufreq(self, cap):
        cpus = self.node.cpufreq
        if cap is not None and not self.nominal_watts:
            return _part(
                CPUFREQ,
                UNSUPPORTED,
                cap,
                reason="no RAPL power limit; cpufreq needs [agent] cpu_nominal_watts to "
                "turn watts into a frequency",
            )
        if cap is not None:
            low, high = self.node.cpu_cap_range(self.nominal_watts)
            if cap > high + _EPS or cap < low - _EPS:
                return _part(
                    CPUFREQ,
                    OUT_OF_RANGE,
                    cap,
                    reason=f"{cap:g} W is outside the cpufreq range {low:g}-{high:g} W",
                )
        khz = None
        for c in cpus:
            want = (
                c.max_khz
                if cap is None
                else max(c.min_khz, min(c.max_khz, int(c.max_khz * cap / self.nominal_watts)))
            )
            path = os.path.join(c.path, "scaling_max_freq")
            try:
                self._set(path, want)
            except OSError as exc:
                return _part(CPUFREQ, FAILED, cap, reason=_why(exc, path))
            khz = want
        part = _part(CPUFREQ, UNCAPPED if cap is None else APPLIED, cap, cap)
        part["scaling_max_khz"] = khz
        return part

    def apply_cpu(self, cap):
        if self.node.rapl_cappable:
            return self._rapl(cap)
        if self.node.cpufreq:
            return self._cpufreq(cap)
        if cap is None:
            return _part(NONE, UNCAPPED, None)
        return _part(
            NONE,
            UNSUPPORTED,
            cap,
            reason="no RAPL power limit (constraint_0_power_limit_uw) and no cpufreq on "
            "this node: CPU caps cannot be applied",
        )

    # -- GPU -------------------------------------------------------------------

    def apply_gpu(self, cap):
        gpus = self.node.gpus
        if not gpus:
            if cap is None:
                return _part(NONE, UNCAPPED, None)
            return _part(NONE, UNSUPPORTED, cap, reason=self.node.gpu_note or "no GPU")
        nvml = self.nvml
        domains = []
        for g in gpus:
            if cap is not None:
                if g.max_limit_w is not None and cap > g.max_limit_w + _EPS:
                    return _part(
                        NVML,
                        OUT_OF_RANGE,
                        cap,
                        reason=f"{cap:g} W is above GPU {g.index}'s maximum {g.max_limit_w:g} W",
                    )
                if g.min_limit_w is not None and cap < g.min_limit_w - _EPS:
                    return _part(
                        NVML,
                        OUT_OF_RANGE,
                        cap,
                        reason=f"{cap:g} W is below GPU {g.index}'s minimum {g.min_limit_w:g} W",
                    )
        for g in gpus:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(g.index)
                if cap is None:
                    try:
                        mw = int(nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))
                    except Exception:
                        mw = int(round((g.max_limit_w or 0) * 1000))
                else:
                    mw = int(round(cap * 1000))
                current = nvml.nvmlDeviceGetPowerManagementLimit(handle)
                if current != mw:
                    if self.dry_run:
                        self.planned.append((f"nvml:gpu{g.index}", mw))
                    else:
                        nvml.nvmlDeviceSetPowerManagementLimit(handle, mw)
            except Exception as exc:
                reason = str(exc)
                if "permission" in reason.lower():
                    reason = f"permission denied setting GPU {g.index}'s limit ({reason})"
                return _part(NVML, FAILED, cap, reason=f"GPU {g.index}: {reason}")
            domains.append({"name": f"gpu{g.index}", "limit_watts": mw / 1000.0})
        applied = domains[0]["limit_watts"] if domains else None
        return _part(NVML, UNCAPPED if cap is None else APPLIED, cap, applied, domains=domains)

    # -- measuring -------------------------------------------------------------

    def measure_cpu(self):
        """{package name: watts} since the previous call (zones with energy_uj)."""
        out = {}
        now = self.clock()
        for d in self.node.rapl:
            if not d.has_energy:
                continue
            uj = _read_int(os.path.join(d.path, "energy_uj"))
            if uj is None:
                continue
            before = self._energy.get(d.zone)
            self._energy[d.zone] = (uj, now)
            if before is None or now <= before[1]:
                continue
            delta = uj - before[0]
            if delta < 0:  # the counter wrapped
                if not d.max_energy_range_uj:
                    continue
                delta += d.max_energy_range_uj
            out[d.name] = round(delta / 1e6 / (now - before[1]), 3)
        return out

    def measure_gpu(self):
        out = {}
        for g in self.node.gpus:
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(g.index)
                out[f"gpu{g.index}"] = self.nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
            except Exception:
                continue
        return out

    # -- one pass ----------------------------------------------------------------

    def measure(self):
        """({cpu domain: watts}, {gpu: watts}) since the previous call."""
        return self.measure_cpu(), self.measure_gpu()

    def status(self, twin, watts=({}, {})):
        """Apply ``twin``'s caps; return the twin status (None without a twin).

        ``watts``: what ``measure`` returned this pass, put into the status.
        """
        cpu_watts, gpu_watts = watts
        if twin is None:
            return None
        cpu = self.apply_cpu(twin.get("cpu_cap_watts"))
        gpu = self.apply_gpu(twin.get("gpu_cap_watts"))
        for part, watts in ((cpu, cpu_watts), (gpu, gpu_watts)):
            if watts:
                part["measured_watts"] = round(sum(watts.values()), 3)
            by_name = {d["name"]: d for d in part["domains"]}
            for name, value in watts.items():
                by_name.setdefault(name, {"name": name, "limit_watts": None})
                by_name[name]["measured_watts"] = value
            part["domains"] = [by_name[n] for n in sorted(by_name)]
            if part["result"] in (UNSUPPORTED, FAILED, OUT_OF_RANGE):
                self._once(logging.WARNING, f"cap not applied: {part['reason']}")
        return {
            "observed_generation": twin.get("generation"),
            "profile": twin.get("profile"),
            "cpu": cpu,
            "gpu": gpu,
        }
