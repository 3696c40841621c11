"""The whole API on one screen: path -> {method: handler}.

Path parameters carry no patterns on purpose: a malformed uuid reaches the
handler, which answers with a specific 404/400 instead of a bare routing 404.
Methods not listed get a 405 with an Allow header listing the methods in the
order given here, which is upstream's (app._method_not_allowed).
"""

from placement.handlers import aggregate
from placement.handlers import allocation
from placement.handlers import allocation_candidate
from placement.handlers import build_request
from placement.handlers import inventory
from placement.handlers import node
from placement.handlers import reshaper
from placement.handlers import resource_class
from placement.handlers import resource_provider
from placement.handlers import root
from placement.handlers import scheduling_report
from placement.handlers import server_group
from placement.handlers import trait
from placement.handlers import usage

ROUTES = {
    "/": {"GET": root.home},
    "/resource_providers": {
        "GET": resource_provider.list_resource_providers,
        "POST": resource_provider.create_resource_provider,
    },
    "/resource_providers/<uuid>": {
        "GET": resource_provider.get_resource_provider,
        "DELETE": resource_provider.delete_resource_provider,
        "PUT": resource_provider.update_resource_provider,
    },
    "/resource_classes": {
        "GET": resource_class.list_resource_classes,
        "POST": resource_class.create_resource_class,
    },
    "/resource_classes/<name>": {
        "GET": resource_class.get_resource_class,
        "PUT": resource_class.update_resource_class,
        "DELETE": resource_class.delete_resource_class,
    },
    "/resource_providers/<uuid>/inventories": {
        "GET": inventory.get_inventories,
        "POST": inventory.create_inventory,
        "PUT": inventory.set_inventories,
        "DELETE": inventory.delete_inventories,
    },
    "/resource_providers/<uuid>/inventories/<resource_class>": {
        "GET": inventory.get_inventory,
        "PUT": inventory.update_inventory,
        "DELETE": inventory.delete_inventory,
    },
    "/resource_providers/<uuid>/usages": {"GET": usage.list_usages},
    "/resource_providers/<uuid>/aggregates": {
        "GET": aggregate.get_aggregates,
        "PUT": aggregate.set_aggregates,
    },
    "/resource_providers/<uuid>/allocations": {
        "GET": allocation.list_for_resource_provider,
    },
    "/allocations": {"POST": allocation.set_allocations},
    "/allocations/<consumer_uuid>": {
        "GET": allocation.list_for_consumer,
        "PUT": allocation.set_allocations_for_consumer,
        "DELETE": allocation.delete_allocations,
    },
    "/allocation_candidates": {"GET": allocation_candidate.list_allocation_candidates},
    "/traits": {"GET": trait.list_traits},
    "/traits/<name>": {
        "GET": trait.get_trait,
        "PUT": trait.put_trait,
        "DELETE": trait.delete_trait,
    },
    "/resource_providers/<uuid>/traits": {
        "GET": trait.list_traits_for_resource_provider,
        "PUT": trait.update_traits_for_resource_provider,
        "DELETE": trait.delete_traits_for_resource_provider,
    },
    "/usages": {"GET": usage.get_total_usages},
    "/reshaper": {"POST": reshaper.reshape},
    # --- extensions (never used by a vanilla client) ---
    "/workload_usages": {"GET": allocation.workload_usages},
    "/nodes": {"GET": node.list_nodes},
    "/nodes/twins": {"POST": node.put_twins},
    "/nodes/<uuid>": {
        "GET": node.get_node,
        "PUT": node.put_node,
        "DELETE": node.delete_node,
    },
    "/nodes/<uuid>/hardware": {
        "GET": node.get_hardware,
        "PUT": node.put_hardware,
    },
    "/nodes/build_outcomes": {"POST": node.post_build_outcomes},
    "/nodes/<uuid>/build_outcome": {
        "POST": node.post_build_outcome,
    },
    "/nodes/<uuid>/heartbeat": {"POST": node.post_heartbeat},
    "/nodes/<uuid>/twin": {
        "GET": node.get_twin,
        "PUT": node.put_twin,
    },
    "/build_requests": {
        "GET": build_request.list_build_requests,
        "POST": build_request.create_build_request,
        "PUT": build_request.update_build_requests,
    },
    "/build_requests/leases": {
        "PUT": build_request.put_leases,
    },
    "/build_requests/counts": {
        "GET": build_request.count_build_requests,
    },
    "/build_requests/<instance_uuid>": {
        "GET": build_request.get_build_request,
        "PUT": build_request.update_build_request,
    },
    "/build_requests/<instance_uuid>/lease": {
        "PUT": build_request.put_lease,
    },
    "/build_requests/<instance_uuid>/instance_state": {
        "PUT": build_request.put_instance_state,
    },
    "/scheduling_reports": {
        "POST": scheduling_report.post_reports,
    },
    "/scheduling_reports/<request_id>": {
        "GET": scheduling_report.get_report,
        "PUT": scheduling_report.put_report,
    },
    "/server_groups": {
        "GET": server_group.list_server_groups,
        "POST": server_group.create_server_group,
    },
    "/server_groups/<uuid>": {
        "GET": server_group.get_server_group,
        "DELETE": server_group.delete_server_group,
    },
    "/server_groups/<uuid>/members/<instance_uuid>": {
        "DELETE": server_group.delete_member,
    },
}


def register(app):
    for path, methods in ROUTES.items():
        for method, view in methods.items():
            endpoint = f"{method} {path}"
            app.add_url_rule(
                path, endpoint, view, methods=[method], provide_automatic_options=False
            )
