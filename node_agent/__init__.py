"""node-agent: one process per node that registers it with placement,
reports that it is alive, and applies the power caps of its twin.

What nova-compute does for a node's inventory and liveness, and what
Joulie's agent does for its caps, over placement's REST API only
(joule.placement_client). docs/node-agent.md is the operator's page.
"""
