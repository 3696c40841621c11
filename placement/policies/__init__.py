"""Policy rules of the placement API, one module per resource.

``list_rules()`` is the ``oslo.policy.policies`` entry point (the sample
policy file is generated from it) and what the enforcer registers. Rule names
and defaults of upstream resources are upstream Placement's; the extension
resources (nodes, build requests, scheduling reports, workload usages, server groups) follow
the same naming style.
"""

from placement.policies import aggregate
from placement.policies import allocation
from placement.policies import allocation_candidate
from placement.policies import base
from placement.policies import build_request
from placement.policies import inventory
from placement.policies import node
from placement.policies import reshaper
from placement.policies import resource_class
from placement.policies import resource_provider
from placement.policies import scheduling_report
from placement.policies import server_group
from placement.policies import trait
from placement.policies import usage

_MODULES = (
    base,
    resource_provider,
    resource_class,
    inventory,
    aggregate,
    usage,
    trait,
    allocation,
    allocation_candidate,
    reshaper,
    node,
    build_request,
    scheduling_report,
    server_group,
)


def list_rules():
    """Every RuleDefault, fresh objects on each call.

    oslo.policy mutates the rules it is given (deprecated-rule handling), so
    each enforcer gets its own copies.
    """
    rules = []
    for module in _MODULES:
        rules.extend(module.list_rules())
    return rules
