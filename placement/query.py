"""Parsing of the query values shared by GET /resource_providers and
GET /allocation_candidates: ``resources``, ``required`` and ``member_of``.

Only syntax and microversion gates live here; whether a resource class,
trait or provider exists is the caller's question (it needs the database).
Every error is a 400 ``placement.errors.ApiError`` whose detail reads like
upstream OpenStack Placement's, because clients and the conformance suite
match on those strings.
"""

import uuid as uuid_lib

from placement import errors

_RESOURCES_FORM = (
    "Badly formed resources parameter. Expected resources query string parameter "
    "in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {got}."
)


# Largest amount a query may ask for: a signed 64-bit integer.
MAX_AMOUNT = 2**63 - 1


def _version_at_least(version, minimum):
    # ``version`` is a microversion.Version (a tuple) or None (= latest).
    return version is None or tuple(version) >= tuple(minimum)


def parse_resources(value):
    """``VCPU:2,MEMORY_MB:1024`` -> ``{"VCPU": 2, "MEMORY_MB": 1024}``.

    :raise ApiError 400: empty value, an item without exactly one ``:``, a
        non-integer amount or an amount below 1.
    """
    if value.strip() == "":
        raise errors.bad_request(_RESOURCES_FORM.format(got="empty string"))
    result = {}
    for item in value.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            raise errors.bad_request(_RESOURCES_FORM.format(got=item))
        name, raw_amount = parts
        try:
            amount = int(raw_amount)
        except ValueError:
            raise errors.bad_request(
                f"Requested resource {name} expected positive integer amount. Got: {raw_amount}."
            ) from None
        if amount < 1:
            raise errors.bad_request(
                f"Requested resource {name} requires amount >= 1. Got: {amount}."
            )
        if amount > MAX_AMOUNT:
            # No inventory can hold it (totals stop at 2147483647), and the
            # databases' 64-bit integers cannot even carry it into the query.
            raise errors.bad_request(
                f"Requested resource {name} amount is out of range: it must be at most "
                f"{MAX_AMOUNT}. Got: {raw_amount}."
            )
        # A class named twice keeps the last amount, as upstream does.
        result[name] = amount
    return result


def _parse_one_required(value, allow_forbidden, allow_any_of):
    """One ``required`` value -> (all-of set, any-of sets, forbidden set)."""
    if value.startswith("in:"):
        if not allow_any_of:
            raise errors.bad_request(
                "Invalid query string parameters: The format "
                "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion "
                f"1.39. Got: {value}"
            )
        names = {part.strip() for part in value[3:].split(",")}
        if not all(names):
            raise errors.bad_request(
                "Invalid query string parameters: Expected 'required' parameter value "
                "of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: "
                f"{value}"
            )
        if any(name.startswith("!") for name in names):
            raise errors.bad_request(
                "Invalid query string parameters: The format "
                "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. "
                f"Got: {value}"
            )
        if len(names) == 1:
            return names, [], set()
        return set(), [names], set()

    names = [part.strip() for part in value.split(",")]
    # Any run of leading '!' means "forbidden" (upstream keeps that quirk
    # rather than break clients; "!!X" forbids X).
    forbidden = {name.lstrip("!") for name in names if name.startswith("!")}
    if not all(names) or not all(forbidden):
        form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
        raise errors.bad_request(
            "Invalid query string parameters: Expected 'required' parameter value of "
            f"the form: {form}. Got an empty trait in: {value}"
        )
    if forbidden and not allow_forbidden:
        raise errors.bad_request(
            "Invalid query string parameters: Expected 'required' parameter value of "
            f"the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
        )
    required = {name for name in names if not name.startswith("!")}
    return required, [], forbidden


def parse_required(values, version):
    """Parse every value of one ``required[SUFFIX]`` key.

    :param values: the values in query order.
    :param version: the request's microversion (``!`` from 1.22; ``in:`` and
        repeating the key from 1.39; before 1.39 only the last value counts,
        as upstream).
    :return: ``(required, any_of, forbidden)``: traits that must all be
        present, a list of sets of which at least one member must be present
        each, and traits that must be absent.
    """
    allow_forbidden = _version_at_least(version, (1, 22))
    allow_any_of = _version_at_least(version, (1, 39))
    if not allow_any_of:
        values = values[-1:]
    required, any_of, forbidden = set(), [], set()
    for value in values:
        req, anys, forb = _parse_one_required(value, allow_forbidden, allow_any_of)
        required |= req
        any_of.extend(anys)
        forbidden |= forb
    return required, any_of, forbidden


def conflicting_traits(required, any_of, forbidden):
    """The trait groups made impossible by ``forbidden`` (for upstream's 400).

    Returns sorted tuples: each single required trait that is also forbidden,
    and each any-of set all of whose members are forbidden.
    """
    found = [(name,) for name in required if name in forbidden]
    found += [tuple(sorted(names)) for names in any_of if names <= forbidden]
    return sorted(found)


def _is_uuid_like(value):
    try:
        uuid_lib.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def parse_member_of(values, version, suffix=""):
    """Parse every value of one ``member_of[SUFFIX]`` key.

    Each value is a UUID, ``in:U1,U2`` (any of), ``!U`` or ``!in:U1,U2``
    (none of). Several values are ANDed (from 1.24); ``!`` needs 1.32.

    :return: ``(any_of, forbidden)``: a list of sets of aggregate UUIDs
        (the provider must be in at least one of each set) and the set of
        aggregate UUIDs it must be in none of.
    """
    if not _version_at_least(version, (1, 24)) and len(values) > 1:
        raise errors.bad_request(f"Multiple member_of{suffix} parameters are not supported")
    allow_forbidden = _version_at_least(version, (1, 32))
    any_of, forbidden = [], set()
    for value in values:
        if "," in value and not (value.startswith("in:") or value.startswith("!in:")):
            raise errors.bad_request(
                "Multiple values for 'member_of' must be prefixed with the 'in:' or "
                f"'!in:' keyword using the valid microversion. Got: {value}"
            )
        if value.startswith("!in:"):
            req, forb = set(), set(value[4:].split(","))
        elif value.startswith("!"):
            req, forb = set(), {value[1:]}
        elif value.startswith("in:"):
            req, forb = set(value[3:].split(",")), set()
        else:
            req, forb = {value}, set()
        for agg in sorted(req | forb):
            if not _is_uuid_like(agg):
                raise errors.bad_request(
                    "Invalid query string parameters: Expected 'member_of' parameter "
                    f"to contain valid UUID(s). Got: {agg}"
                )
        if forb and not allow_forbidden:
            raise errors.bad_request(
                f"Forbidden member_of{suffix} parameters are not supported in the "
                "specified microversion"
            )
        if req:
            any_of.append({str(uuid_lib.UUID(a)) for a in req})
        forbidden |= {str(uuid_lib.UUID(a)) for a in forb}
    return any_of, forbidden


def parse_in_tree(value):
    """A provider UUID (dashed or not) -> dashed lower-case form.

    :raise ApiError 400: not a UUID, with upstream's message.
    """
    if not _is_uuid_like(value.strip()):
        raise errors.bad_request(
            "Invalid query string parameters: Expected 'in_tree' parameter to be a "
            f"format of uuid. Got: {value}"
        )
    return str(uuid_lib.UUID(value.strip()))
