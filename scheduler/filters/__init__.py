"""Host filters: each drops hosts that must not take the request, with a reason.

A filter is a class with a ``name``, a ``reason`` (one sentence shown to the
operator when it removes hosts), ``host_passes(host, spec)`` answering a
bool or a ``Verdict`` (fits, or does not fit with a reason; an exception is
reported as the plugin's failure, never as "does not fit") and
``node_fields(spec)``: the node-data fields of ``HostState`` it reads for
that spec (the scheduler asks placement for node data only when some enabled
filter, weigher or the alternates need a field); ``spec`` is the request's
``scheduler.request_state.RequestState`` (the spec's fields plus what the
worker looked up for it, such as the server group). A filter may also have
``root_forbidden_traits(spec)``: root-provider traits of hosts it would
always remove, which placement then leaves out of the candidates.
Filters are found through the ``joule.scheduler.filters`` entry points
(setup.cfg lists ours), so a filter from another installed package is
enabled by naming its entry point in ``[filter_scheduler] enabled_filters``,
without editing this package. ``run_filters`` applies the configured chain
in order and records, per filter, how many hosts went in, how many it removed
and why: the explanation a "no valid host" error carries.
"""

import logging

from stevedore import extension

LOG = logging.getLogger(__name__)

# The entry point namespace of host filters (nova's is nova.scheduler.filters).
NAMESPACE = "joule.scheduler.filters"

# ``[filter_scheduler] available_filters`` value meaning every installed one.
ALL_AVAILABLE = "all"

# Ours, in the default chain order (cheap, selective ones first); each is
# an entry point of NAMESPACE in setup.cfg.
DEFAULT_CHAIN = (
    "ComputeFilter",
    "ForceHostsFilter",
    "CellFilter",
    "AvailabilityZoneFilter",
    "NodeSelectorFilter",
    "JoulieFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "SameHostFilter",
    "DifferentHostFilter",
)


class UnknownFilter(ValueError):
    pass


def installed():
    """{entry point name: filter class} of every installed filter. An entry
    point whose module fails to import is left out (and logged), so one
    broken plugin does not hide the others; naming it is then an error."""

    def failed(_manager, entrypoint, exc):
        LOG.warning(
            "filter entry point %s (%s) failed to load: %s", entrypoint.name, entrypoint.value, exc
        )

    mgr = extension.ExtensionManager(
        NAMESPACE, invoke_on_load=False, on_load_failure_callback=failed
    )
    return {ext.name: ext.plugin for ext in mgr}


def available(available_filters, found=None):
    """The installed filters ``[filter_scheduler] available_filters`` allows."""
    found = installed() if found is None else found
    if ALL_AVAILABLE in available_filters:
        return found
    return {name: cls for name, cls in found.items() if name in available_filters}


def load(names, available_filters=(ALL_AVAILABLE,)):
    """Filter instances for ``names``, in order; a name that is not an
    installed and available filter fails at start-up."""
    known = available(available_filters)
    out = []
    for name in names:
        cls = known.get(name)
        if cls is None:
            raise UnknownFilter(
                f"filter {name!r} in [filter_scheduler] enabled_filters is not installed "
                f"or not in available_filters; available: {', '.join(sorted(known))}"
                + _reinstall_hint(known)
            )
        out.append(cls())
    return out


def _reinstall_hint(known):
    # Our own entry points come from the installed package metadata: a
    # checkout updated without reinstalling has none (or old ones).
    if not known:
        return " (joule's own filters are not registered: reinstall the package)"
    return ""


def from_conf(group):
    """The enabled filter chain of a ``[filter_scheduler]`` group."""
    return load(group.enabled_filters, group.available_filters)


class Verdict:
    """What a filter may answer instead of a bool: fits, or does not fit
    because ``reason`` (shown to the operator with the filter's record)."""

    __slots__ = ("fits", "reason")

    def __init__(self, fits, reason=None):
        self.fits = bool(fits)
        self.reason = reason

    def __bool__(self):
        return self.fits


FITS = Verdict(True)


def run_filters(hosts, spec, filters):
    """Apply ``filters`` in order; return (remaining hosts, per-filter records).

    A filter's ``host_passes`` answers a bool or a Verdict. One that raises
    removes the host it raised for (it cannot be said to fit), and its
    record says it failed, with the error: "the plugin broke" is never
    reported as "no host fits"."""
    records = []
    for flt in filters:
        before = len(hosts)
        hosts, record = _apply(flt, hosts, spec)
        records.append(record)
        LOG.debug("filter %s: %d -> %d hosts", flt.name, before, len(hosts))
        if not hosts:
            LOG.info("filter %s removed all remaining candidates of %s", flt.name, spec.request_id)
            break
    return hosts, records


def _apply(flt, hosts, spec):
    before = len(hosts)
    explain = getattr(flt, "explain", None)
    try:
        # hot: runs per candidate host per request; no logging inside.
        kept, gone, reasons, errors = _judged(flt, hosts, spec)
    except Exception:  # noqa: BLE001 - a plugin broke: judged again, each error kept
        kept, gone, reasons, errors = _judged_one_by_one(flt, hosts, spec)
    if errors:
        LOG.error("filter %s failed on %d host(s): %s", flt.name, len(errors), errors[0])
    if gone and explain is not None:
        reason = explain(gone)
    elif reasons:
        reason = "; ".join(sorted(set(reasons)))
    else:
        reason = flt.reason
    record = {
        "name": flt.name,
        "before": before,
        "after": len(kept),
        "removed": before - len(kept),
        # A filter with several causes may word its reason from the hosts it
        # removed (``explain(removed_hosts)``) or answer Verdicts with one.
        "reason": reason,
    }
    if errors:
        record["errors"] = len(errors)
        record["error"] = errors[0]
    return kept, record


def _judged(flt, hosts, spec):
    """(kept, removed, their Verdict reasons, []): one pass over the hosts."""
    answers = [flt.host_passes(h, spec) for h in hosts]
    kept = [h for h, answer in zip(hosts, answers, strict=True) if answer]
    if len(kept) == len(hosts):
        return kept, [], [], []
    gone = [h for h, answer in zip(hosts, answers, strict=True) if not answer]
    reasons = [a.reason for a in answers if not a and isinstance(a, Verdict) and a.reason]
    return kept, gone, reasons, []


def _judged_one_by_one(flt, hosts, spec):
    """``_judged`` for a filter that raised: a host it raises for is removed
    and its error kept (said in the record, not as "does not fit")."""
    kept, gone, reasons, errors = [], [], [], []
    for h in hosts:
        try:
            answer = flt.host_passes(h, spec)
        except Exception as exc:  # noqa: BLE001 - said in the record
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if answer:
            kept.append(h)
            continue
        gone.append(h)
        if isinstance(answer, Verdict) and answer.reason:
            reasons.append(answer.reason)
    return kept, gone, reasons, errors


def add_records(total, records):
    """Sum per-filter records of one batch of hosts into ``total`` (by filter
    name, in chain order); a filter the batch never reached adds nothing."""
    by_name = {r["name"]: r for r in total}
    for rec in records:
        have = by_name.get(rec["name"])
        if have is None:
            have = {
                "name": rec["name"],
                "before": 0,
                "after": 0,
                "removed": 0,
                "reason": rec["reason"],
            }
            by_name[rec["name"]] = have
            total.append(have)
        for key in ("before", "after", "removed"):
            have[key] += rec[key]
        if rec.get("errors"):
            have["errors"] = have.get("errors", 0) + rec["errors"]
            have.setdefault("error", rec["error"])
    return total
