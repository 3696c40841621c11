"""HTTP handler of GET /allocation_candidates (upstream 1.10-1.39 plus paging
and node data extensions; see docs/architecture.md)."""

import base64
import binascii
import hashlib
import json
import re
import urllib.parse

import flask
import orjson

from placement import errors
from placement import query
from placement import util
from placement.objects import allocation_candidate as ac_obj
from placement.objects import candidate_request
from placement.policies import allocation_candidate as policies
from placement.schemas import allocation_candidate as schema

EXTENSION_KEYS = ("page_size", "page_marker", "page_start", "node_data")
MAX_PAGE_SIZE = 1000
# page_start: a decimal fraction of the root-id range, 0 <= f < 1.
PAGE_START_RE = re.compile(r"0(\.[0-9]{1,17})?")


def _query_fingerprint(items):
    """A short hash of the request's query, paging keys aside, so a marker
    cannot silently be replayed against a different query."""
    kept = sorted((k, v) for k, v in items if k not in EXTENSION_KEYS)
    return hashlib.sha256(repr(kept).encode()).hexdigest()[:12]


def encode_marker(position, fingerprint):
    """``1:<last root>:<fp>`` for a walk from the lowest root,
    ``2:<last root>:<start root>:<0|1 wrapped>:<fp>`` for one with a start."""
    if position.start is None:
        raw = f"1:{position.after}:{fingerprint}"
    else:
        raw = f"2:{position.after}:{position.start}:{int(position.wrapped)}:{fingerprint}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_marker(marker, fingerprint):
    """The Position to resume at; 400 for anything not minted for this query."""
    bad = errors.bad_request(
        f"Invalid page_marker {marker!r}: not a marker returned by a previous page of this query.",
        errors.PAGE_MARKER_INVALID,
    )
    try:
        raw = base64.urlsafe_b64decode(marker + "=" * (-len(marker) % 4)).decode()
        fields = raw.split(":")
        version, fp = fields[0], fields[-1]
        if version == "1" and len(fields) == 3:
            position = ac_obj.Position(int(fields[1]))
        elif version == "2" and len(fields) == 5 and fields[3] in ("0", "1"):
            position = ac_obj.Position(int(fields[1]), int(fields[2]), fields[3] == "1")
        else:
            raise bad
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    # -1: a wrapped walk that has served no root below its start yet.
    lowest = -1 if position.wrapped else 0
    if (
        fp != fingerprint
        or position.after < lowest
        or (position.start is not None and position.start < 0)
    ):
        raise bad
    return position


def _extension_params(args):
    page_size = util.single_query_value("page_size")
    marker = util.single_query_value("page_marker")
    start = util.single_query_value("page_start")
    node_data = util.single_query_value("node_data")
    if page_size is not None:
        if not re.fullmatch(r"[1-9][0-9]*", page_size) or int(page_size) > MAX_PAGE_SIZE:
            raise errors.bad_request(
                f"Invalid page_size {page_size!r}: expected an integer from 1 to {MAX_PAGE_SIZE}.",
                errors.QUERYPARAM_BAD_VALUE,
            )
        page_size = int(page_size)
    if marker is not None and page_size is None:
        raise errors.bad_request("page_marker requires page_size.", errors.QUERYPARAM_MISSING_VALUE)
    if start is not None:
        if not PAGE_START_RE.fullmatch(start):
            raise errors.bad_request(
                f"Invalid page_start {start!r}: expected a decimal fraction from 0 up to, "
                "not including, 1 (such as 0 or 0.25).",
                errors.QUERYPARAM_BAD_VALUE,
            )
        if page_size is None:
            raise errors.bad_request(
                "page_start requires page_size.", errors.QUERYPARAM_MISSING_VALUE
            )
        start = float(start)
    if node_data is not None:
        if node_data.lower() not in ("true", "false"):
            raise errors.bad_request(
                f"Invalid node_data {node_data!r}: expected true or false.",
                errors.QUERYPARAM_BAD_VALUE,
            )
        node_data = node_data.lower() == "true"
    return page_size, marker, start, bool(node_data)


def _parse_groups(args, version):
    """Query string -> {suffix: Group}, with upstream's validation order."""
    named = version >= (1, 33)
    pattern = re.compile(
        r"^(resources|required|member_of|in_tree)("
        + (schema.GROUP_SUFFIX_1_33 if named else schema.GROUP_SUFFIX)
        + ")?$"
    )
    groups = {}
    for key in args:  # keys in first-seen order
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        group = groups.setdefault(suffix, candidate_request.Group(suffix=suffix))
        values = args.getlist(key)
        if prefix == "resources":
            group.resources = query.parse_resources(values[-1])
        elif prefix == "required":
            group.required, group.any_of, group.forbidden = query.parse_required(values, version)
        elif prefix == "member_of":
            group.member_of, group.forbidden_aggs = query.parse_member_of(values, version, suffix)
        else:
            group.in_tree = query.parse_in_tree(values[-1])
    return groups


def _check_groups(groups, version, same_subtrees):
    if version >= (1, 36):
        resourceless = [s for s, g in groups.items() if not g.resources]
        if len(resourceless) == len(groups):
            raise errors.bad_request(
                "There must be at least one resources or resources[$S] parameter.",
                errors.QUERYPARAM_MISSING_VALUE,
            )
        in_subtree = set().union(*same_subtrees) if same_subtrees else set()
        bad = [s for s in resourceless if s not in in_subtree]
        if bad:
            raise errors.bad_request(
                "Resourceless suffixed group request should be specified in "
                f"`same_subtree` query param: bad group(s) - {bad}.",
                errors.QUERYPARAM_BAD_VALUE,
            )
        unknown = [s for s in sorted(in_subtree) if s not in groups]
        if unknown:
            raise errors.bad_request(
                f"Real suffixes should be specified in `same_subtree`: {unknown} not "
                f"found in {list(groups)}.",
                errors.QUERYPARAM_BAD_VALUE,
            )
    else:
        orphans = [
            f"required{s}"
            for s, g in groups.items()
            if (g.required or g.any_of or g.forbidden) and not g.resources
        ]
        if orphans:
            raise errors.bad_request(
                "All traits parameters must be associated with resources.  Found the "
                f"following orphaned traits keys: {', '.join(orphans)}"
            )
        orphans = [
            f"member_of{s}"
            for s, g in groups.items()
            if (g.member_of or g.forbidden_aggs) and not g.resources
        ]
        if orphans:
            raise errors.bad_request(
                "All member_of parameters must be associated with resources. Found the "
                f"following orphaned member_of keys: {', '.join(orphans)}"
            )
        if not all(g.resources for g in groups.values()):
            raise errors.bad_request("All request groups must specify resources.")
        if not groups:
            raise errors.bad_request(
                "At least one request group (`resources` or `resources{$S}`) is required."
            )
    if version >= (1, 22):
        conflicts = []
        for suffix, g in groups.items():
            for names in query.conflicting_traits(g.required, g.any_of, g.forbidden):
                conflicts.append(f"required{suffix}: ({', '.join(names)})")
        if conflicts:
            raise errors.bad_request(
                "Conflicting required and forbidden traits found in the following traits "
                f"keys: {', '.join(sorted(conflicts))}"
            )


def _request_wide(args, version):
    limit = args.getlist("limit")
    limit = int(limit[0]) if limit else None
    policy = args.getlist("group_policy")
    policy = policy[0] if policy else None
    root_required, root_forbidden = set(), set()
    values = args.getlist("root_required")
    if values:
        if len(values) > 1:
            raise errors.bad_request(
                "Query parameter 'root_required' may be specified only once.",
                errors.ILLEGAL_DUPLICATE_QUERYPARAM,
            )
        # root_required takes the plain form only (no in:), with '!' allowed.
        required, any_of, forbidden = query.parse_required(values, (1, 38))
        root_required, root_forbidden = required, forbidden
        conflicts = sorted(root_required & root_forbidden)
        if conflicts:
            raise errors.bad_request(
                "Conflicting required and forbidden traits found in root_required: "
                f"{', '.join(conflicts)}",
                errors.QUERYPARAM_BAD_VALUE,
            )
    same_subtrees = []
    for value in args.getlist("same_subtree"):
        suffixes = {part.strip() for part in value.split(",")}
        if "" in suffixes:
            raise errors.bad_request(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                errors.QUERYPARAM_BAD_VALUE,
            )
        same_subtrees.append(suffixes)
    return limit, policy, root_required, root_forbidden, same_subtrees


def list_allocation_candidates():
    util.context().can(policies.LIST)
    version = tuple(util.version())
    if version < (1, 10):
        raise errors.not_found("")
    args = flask.request.args
    page_size, marker, start, want_nodes = _extension_params(args)
    # Upstream's schemas validate the last value of each key (webob's dict()).
    plain = {k: args.getlist(k)[-1] for k in args if k not in EXTENSION_KEYS}
    util.validate_query(schema.get_schema(version), plain)

    limit, policy, root_required, root_forbidden, same_subtrees = _request_wide(args, version)
    groups = _parse_groups(args, version)
    _check_groups(groups, version, same_subtrees)
    if not policy and len([s for s in groups if s]) > 1:
        raise errors.bad_request(
            'The "group_policy" parameter is required when specifying more than one '
            '"resources{N}" parameter.'
        )

    ordered = [groups[s] for s in sorted(groups, key=lambda s: (s != "", s))]
    req = candidate_request.CandidateRequest(
        groups=ordered,
        group_policy=policy,
        limit=limit,
        root_required=root_required,
        root_forbidden=root_forbidden,
        same_subtrees=same_subtrees,
        nested_aware=version >= (1, 29),
    )

    fingerprint = _query_fingerprint(args.items(multi=True))
    # A marker carries the walk's start root: page_start only starts a walk.
    position = decode_marker(marker, fingerprint) if marker is not None else None
    deps = util.deps()
    conf = deps.conf.placement
    page = ac_obj.find(
        deps.db,
        req,
        version,
        page_size=page_size,
        position=position,
        randomize=conf.randomize_allocation_candidates,
        max_candidates=conf.max_allocation_candidates,
        start_fraction=start,
        with_nodes=want_nodes,
    )

    # The page holds its requests and summaries as JSON texts: join them once.
    parts = [
        '{"allocation_requests": [',
        ", ".join(page.allocation_requests),
        '], "provider_summaries": {',
        ", ".join(f'"{u}": {text}' for u, text in page.provider_summaries.items()),
        "}",
    ]
    if want_nodes:
        parts.append(', "nodes": ' + _nodes_text(page.nodes))
    if page_size is not None:
        links = []
        if page.next_marker is not None:
            items = [(k, v) for k, v in args.items(multi=True) if k != "page_marker"]
            items.append(("page_marker", encode_marker(page.next_marker, fingerprint)))
            href = (
                flask.request.script_root + flask.request.path + "?" + urllib.parse.urlencode(items)
            )
            links.append({"rel": "next", "href": href})
        parts.append(', "links": ' + json.dumps(links))
    parts.append("}")
    return util.json_response(None, last_modified="now", text="".join(parts))


def _nodes_text(nodes):
    """The page's node data (the extension's ``nodes``) as JSON text, with
    orjson: the standard encoder was about a tenth of what placement spent
    on a scheduler's candidate pages (py-spy, 5,000 hosts), and orjson is
    ten times faster on such a page. Not upstream's part of the body, so its
    spacing (none after separators) is free; anything orjson refuses goes
    through the standard encoder."""
    try:
        return orjson.dumps(nodes).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(nodes)
