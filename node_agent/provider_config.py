"""Provider config files in nova's provider.yaml format (schema version 1.0).

::

    meta:
      schema_version: '1.0'
    providers:
      - identification:
          uuid: $COMPUTE_NODE        # or name: <[agent] host>
        inventories:
          additional:
            - CUSTOM_FPGA:
                total: 4
                reserved: 1
        traits:
          additional:
            - CUSTOM_RACK_A1

An entry applies to this node's root provider when it names it
(``$COMPUTE_NODE``, or ``name`` equal to ``[agent] host``); others are
ignored (this agent has no nested providers). As in nova, additional
inventories must be custom resource classes (the agent reports the standard
ones itself), and traits must be custom or os-traits names. Anything else in
the file is an error naming where it is: the agent refuses to start.
"""

import math

import os_traits
import yaml

COMPUTE_NODE = "$COMPUTE_NODE"
SUPPORTED_VERSIONS = ("1.0",)
_INVENTORY_KEYS = {"total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio"}
_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_CUSTOM = "CUSTOM_"


class ProviderConfigError(ValueError):
    pass


def _fail(path, where, why):
    raise ProviderConfigError(f"provider config {path}: {where}: {why}")


def _section(path, where, value, kind):
    """``value`` (None: empty) when it is a ``kind``; else a ProviderConfigError."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        _fail(path, where, f"expected a {'mapping' if kind is dict else 'list'}")
    return value


def _name_ok(name):
    return (
        isinstance(name, str)
        and name.startswith(_CUSTOM)
        and len(name) > len(_CUSTOM)
        and all(c.isupper() or c.isdigit() or c == "_" for c in name)
    )


def _inventory(path, where, name, fields):
    if not _name_ok(name):
        _fail(path, where, f"{name!r} is not a custom resource class (CUSTOM_[A-Z0-9_]+)")
    if not isinstance(fields, dict) or "total" not in fields:
        _fail(path, where, f"{name} needs a mapping with at least 'total'")
    unknown = set(fields) - _INVENTORY_KEYS
    if unknown:
        _fail(path, where, f"{name}: unknown key(s) {', '.join(sorted(unknown))}")
    out = {}
    for key, value in fields.items():
        kind = float if key == "allocation_ratio" else int
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(path, where, f"{name}.{key} must be a number")
        if not math.isfinite(value):
            _fail(path, where, f"{name}.{key} must be a finite number")
        if kind is int and value != int(value):
            _fail(path, where, f"{name}.{key} must be an integer")
        if value < 0 or (key in ("total", "min_unit", "max_unit", "step_size") and value < 1):
            _fail(path, where, f"{name}.{key} is out of range ({value})")
        out[key] = kind(value)
    if out.get("reserved", 0) > out["total"]:
        _fail(path, where, f"{name}.reserved is greater than its total")
    return out


def load(path, host):
    """({custom resource class: inventory fields}, sorted traits) for ``host``.

    :raise ProviderConfigError: the file cannot be read or is not valid.
    """
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise ProviderConfigError(
            f"provider config {path}: cannot read: {exc.strerror or exc}"
        ) from None
    except yaml.YAMLError as exc:
        raise ProviderConfigError(f"provider config {path}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        _fail(path, "top level", "expected a mapping with meta and providers")
    meta = _section(path, "meta", data.get("meta"), dict)
    version = str(meta.get("schema_version", ""))
    if version not in SUPPORTED_VERSIONS:
        _fail(path, "meta.schema_version", f"{version!r} is not one of {SUPPORTED_VERSIONS}")
    unknown = set(data) - {"meta", "providers"}
    if unknown:
        _fail(path, "top level", f"unknown key(s) {', '.join(sorted(unknown))}")
    providers = _section(path, "providers", data.get("providers"), list)
    inventories, traits = {}, set()
    for i, entry in enumerate(providers):
        where = f"providers[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("identification"), dict):
            _fail(path, where, "needs an identification mapping (uuid or name)")
        ident = entry["identification"]
        if set(ident) - {"uuid", "name"} or len(ident) != 1:
            _fail(path, f"{where}.identification", "exactly one of uuid or name")
        if ident.get("uuid", ident.get("name")) not in (COMPUTE_NODE, host):
            continue  # another provider: not ours
        extra = set(entry) - {"identification", "inventories", "traits"}
        if extra:
            _fail(path, where, f"unknown key(s) {', '.join(sorted(extra))}")
        inv_section = _section(path, f"{where}.inventories", entry.get("inventories"), dict)
        additional = _section(
            path, f"{where}.inventories.additional", inv_section.get("additional"), list
        )
        for j, item in enumerate(additional):
            iwhere = f"{where}.inventories.additional[{j}]"
            if not isinstance(item, dict):
                _fail(path, iwhere, "expected {CUSTOM_CLASS: {total: ...}}")
            for name, fields in item.items():
                if name in inventories:
                    _fail(path, iwhere, f"{name} is given twice")
                inventories[name] = _inventory(path, iwhere, name, fields)
        trait_section = _section(path, f"{where}.traits", entry.get("traits"), dict)
        trait_names = _section(
            path, f"{where}.traits.additional", trait_section.get("additional"), list
        )
        for j, name in enumerate(trait_names):
            if not (isinstance(name, str) and (_name_ok(name) or name in _STANDARD_TRAITS)):
                _fail(
                    path,
                    f"{where}.traits.additional[{j}]",
                    f"{name!r} is neither a custom trait (CUSTOM_[A-Z0-9_]+) nor an os-traits name",
                )
            traits.add(name)
    return inventories, sorted(traits)
