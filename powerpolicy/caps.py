"""Power caps written into a twin's spec for a profile.

Follows Joulie's defaults: performance runs at 100 % of the hardware's maximum
cap, eco at a percentage of it (60 % by default), never below the hardware's
minimum cap. GPU nodes get GPU caps only: capping the host CPU of a GPU node
saves little and starves the GPUs (Joulie's exp-03 finding). A CPU node
without a known cap range gets the absolute fallback caps.
"""

from joule import vocabulary


def _pct_cap(max_cap, min_cap, pct):
    value = max_cap * pct / 100.0
    if min_cap is not None:
        value = max(value, min_cap)
    return round(value, 3)


def caps_for(hardware, caps_profile, opts):
    """(cpu_cap_watts, gpu_cap_watts) for ``caps_profile`` on ``hardware``.

    :param hardware: a powerpolicy.hardware.HardwareView-like object with
        gpu_count, cpu/gpu min/max cap watts (None when unknown).
    :param opts: the [power] option group (cap percentages and fallbacks).
    """
    perf = caps_profile == vocabulary.PERFORMANCE
    cpu_cap = gpu_cap = None
    if hardware.gpu_count > 0:
        if hardware.gpu_max_cap_watts is not None:
            pct = opts.gpu_performance_cap_pct_of_max if perf else opts.gpu_eco_cap_pct_of_max
            gpu_cap = _pct_cap(hardware.gpu_max_cap_watts, hardware.gpu_min_cap_watts, pct)
    elif hardware.cpu_max_cap_watts is not None:
        pct = opts.cpu_performance_cap_pct_of_max if perf else opts.cpu_eco_cap_pct_of_max
        cpu_cap = _pct_cap(hardware.cpu_max_cap_watts, hardware.cpu_min_cap_watts, pct)
    else:
        cpu_cap = float(opts.performance_cap_watts if perf else opts.eco_cap_watts)
    return cpu_cap, gpu_cap
