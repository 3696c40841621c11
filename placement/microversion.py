"""Microversions 1.0 to 1.39, as upstream OpenStack Placement defines them.

A request's version is a ``Version`` on ``flask.g.version``; handlers ask
``want(1, 20)`` style questions with ``g.version.matches((1, 20))``.
"""

import microversion_parse

SERVICE_TYPE = "placement"
HEADER = "OpenStack-API-Version"

VERSIONS = [
    "1.0",
    "1.1",  # aggregates of a provider
    "1.2",  # /resource_classes
    "1.3",  # member_of on GET /resource_providers
    "1.4",  # resources on GET /resource_providers
    "1.5",  # DELETE /resource_providers/{uuid}/inventories
    "1.6",  # /traits and provider traits
    "1.7",  # PUT /resource_classes/{name} is a bodiless create-or-verify
    "1.8",  # project_id and user_id required on PUT /allocations
    "1.9",  # GET /usages
    "1.10",  # GET /allocation_candidates
    "1.11",  # 'allocations' link of a provider
    "1.12",  # dict form of allocations (GET/PUT) and of allocation_requests
    "1.13",  # POST /allocations
    "1.14",  # parent/root provider uuids, in_tree
    "1.15",  # last-modified and cache-control headers
    "1.16",  # limit on GET /allocation_candidates
    "1.17",  # required on GET /allocation_candidates, traits in summaries
    "1.18",  # required on GET /resource_providers
    "1.19",  # generation and conflict detection on provider aggregates
    "1.20",  # POST /resource_providers returns 200 with the provider
    "1.21",  # member_of on GET /allocation_candidates
    "1.22",  # forbidden traits (!TRAIT)
    "1.23",  # error codes in error bodies
    "1.24",  # several member_of on GET /resource_providers
    "1.25",  # granular request groups (numbered suffixes)
    "1.26",  # reserved may equal total
    "1.27",  # every inventory in provider_summaries
    "1.28",  # consumer generations
    "1.29",  # nested providers in allocation candidates
    "1.30",  # POST /reshaper
    "1.31",  # in_tree on GET /allocation_candidates
    "1.32",  # forbidden aggregates (member_of=!...)
    "1.33",  # string request group suffixes
    "1.34",  # mappings in allocation requests
    "1.35",  # root_required
    "1.36",  # same_subtree, resourceless groups
    "1.37",  # re-parenting and un-parenting providers
    "1.38",  # consumer_type
    "1.39",  # in: any-of syntax for required
]

MIN_VERSION = VERSIONS[0]
MAX_VERSION = VERSIONS[-1]


class Version(tuple):
    """A (major, minor) pair that compares like a tuple."""

    def __new__(cls, major, minor):
        return super().__new__(cls, (int(major), int(minor)))

    @classmethod
    def parse(cls, text):
        major, minor = text.split(".")
        return cls(major, minor)

    def matches(self, min_version=None, max_version=None):
        """True when min_version <= self <= max_version (tuples, inclusive)."""
        if min_version is not None and self < tuple(min_version):
            return False
        if max_version is not None and self > tuple(max_version):
            return False
        return True

    def __str__(self):
        return f"{self[0]}.{self[1]}"


def extract(headers):
    """Return the requested Version.

    :raise ValueError: the version is well formed but not supported (406).
    :raise TypeError: the header is malformed (400).
    """
    found = microversion_parse.extract_version(headers, SERVICE_TYPE, VERSIONS)
    return Version(found.major, found.minor)
