"""The Grafana dashboards and Prometheus rules query only what the code exports.

Every PromQL expression of every dashboard panel, template variable and
alert rule in ``etc/`` is parsed; each metric name it reads must be a series
that a module of the services exports, and each label name it uses (in
matchers, ``by``/``without``, ``on``/``ignoring``, ``group_left``/``right``)
must be a label of one of the metrics it reads (or a label Prometheus adds
at scrape time). The exported series are collected from the prometheus_client
registries of the modules that import prometheus_client, never from a list
kept here, so renaming a metric or a label without the dashboards fails here.

``promtool check rules`` (Prometheus' own parser and rule checker) runs on
the rule files and on every panel query where promtool is installed (Debian
package ``prometheus``).
"""

import importlib
import inspect
import json
import os
import pathlib
import re
import shutil
import subprocess

import prometheus_client
import promql_parser
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "etc" / "grafana").glob("*.json"))
RULE_FILES = sorted((ROOT / "etc" / "prometheus").glob("*.yml"))
SERVICE_PACKAGES = ("placement", "scheduler", "conductor", "powerpolicy", "joule", "node_agent")
# Labels Prometheus puts on every series it scrapes.
TARGET_LABELS = frozenset({"job", "instance"})
# Grafana's built-in interval variables, as Prometheus would receive them.
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_IMPORTS_PROMETHEUS = re.compile(
    r"^\s*(import prometheus_client|from prometheus_client)", re.MULTILINE
)


# -- what the code exports ----------------------------------------------------


def metric_modules():
    """Names of the service modules that import prometheus_client."""
    out = []
    for package in SERVICE_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if _IMPORTS_PROMETHEUS.search(path.read_text(encoding="utf-8")):
                out.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return out


def _registry_collectors(registry):
    # prometheus_client keeps which series names each collector exports in
    # this mapping; it has no public accessor for it.
    return dict(registry._collector_to_names)


def _collectors_in(namespace):
    """{collector: exported series names} of registries and metrics among attributes."""
    found = {}
    for value in list(vars(namespace).values()):
        if isinstance(value, prometheus_client.CollectorRegistry):
            found.update(_registry_collectors(value))
        elif isinstance(value, MetricWrapperBase):
            scratch = prometheus_client.CollectorRegistry()
            scratch.register(value)
            found.update(_registry_collectors(scratch))
    return found


def module_collectors(module):
    """Collectors a module defines: module-level registries and metrics, and those of
    every instance of its classes that construct without arguments (such as
    powerpolicy.metrics.Metrics, one registry per controller)."""
    found = _collectors_in(module)
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__:
            continue
        try:
            signature = inspect.signature(cls)
        except (TypeError, ValueError):
            continue
        if any(
            p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in signature.parameters.values()
        ):
            continue
        found.update(_collectors_in(cls()))
    return found


# Types whose family name is no series of its own: a counter is scraped as
# <name>_total (and _created), a histogram as _bucket/_sum/_count ...
_SUFFIXED_TYPES = frozenset({"counter", "histogram", "summary", "info"})


def _series_names(collector, names):
    if isinstance(collector, MetricWrapperBase) and collector._type in _SUFFIXED_TYPES:
        return set(names) - {collector._name}
    return set(names)


def _labels_of(collector, series_name):
    if isinstance(collector, MetricWrapperBase):
        labels = set(collector._labelnames)
        if collector._type == "histogram" and series_name.endswith("_bucket"):
            labels.add("le")
        return labels
    return {
        name
        for family in collector.collect()
        for sample in family.samples
        if sample.name == series_name
        for name in sample.labels
    }


def exported_series():
    """{series name as Prometheus scrapes it: label names}, over every metric module."""
    series = {}
    missing = []
    for name in metric_modules():
        collectors = module_collectors(importlib.import_module(name))
        if not collectors:
            missing.append(name)
        for collector, names in collectors.items():
            for series_name in _series_names(collector, names):
                series.setdefault(series_name, set()).update(_labels_of(collector, series_name))
    assert not missing, (
        f"{', '.join(missing)} import prometheus_client but define no metric this test can "
        "find: keep metrics in a module-level registry or metric object, or in a class that "
        "constructs without arguments and holds its registry as an attribute"
    )
    return series


@pytest.fixture(scope="module")
def exported():
    series = exported_series()
    assert series, "no metric module found"
    return series


# -- what the dashboards and rules query -----------------------------------------


def _grafana_to_promql(expr):
    for var, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(var, value)
    return expr


def _panels(panels):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries(path):
    """[(where, PromQL)] of every panel target of a Grafana dashboard."""
    board = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for panel in _panels(board["panels"]):
        if panel["type"] == "row":
            continue
        assert panel.get("targets"), f"{path.name}: panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            out.append(
                (
                    f"{path.name}: panel {panel['title']!r} {target['refId']}",
                    _grafana_to_promql(target["expr"]),
                )
            )
    return out


_LABEL_VALUES = re.compile(r"^label_values\(\s*(?P<selector>.+?)\s*,\s*(?P<label>\w+)\s*\)$")


def dashboard_variables(path):
    """[(where, PromQL selector, label)] of the label_values() template variables."""
    board = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for var in board.get("templating", {}).get("list", []):
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        match = _LABEL_VALUES.match(query.strip())
        assert match, f"{path.name}: variable {var['name']!r}: unsupported query {query!r}"
        out.append((f"{path.name}: variable {var['name']!r}", match["selector"], match["label"]))
    return out


def rule_queries(path):
    """[(where, PromQL)] of every alerting and recording rule of a rule file."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        (f"{path.name}: {rule.get('alert') or rule.get('record')}", rule["expr"])
        for group in data["groups"]
        for rule in group["rules"]
    ]


def referenced(expr):
    """(metric names, label names) an expression reads."""
    metrics, labels = set(), set()

    def walk(node):
        if node is None:
            return
        if isinstance(node, promql_parser.VectorSelector):
            matchers = list(node.matchers.matchers)
            for group in node.matchers.or_matchers:
                matchers.extend(group)
            if node.name:
                metrics.add(node.name)
            for matcher in matchers:
                if matcher.name == "__name__":
                    metrics.add(matcher.value)
                else:
                    labels.add(matcher.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.AggregateExpr):
            if node.modifier is not None:
                labels.update(node.modifier.labels)
            walk(node.expr)
            walk(node.param)
        elif isinstance(node, promql_parser.BinaryExpr):
            modifier = node.modifier
            if modifier is not None:
                if modifier.matching is not None:
                    labels.update(modifier.matching.labels)
                labels.update(modifier.group_labels or ())
            walk(node.lhs)
            walk(node.rhs)
        elif isinstance(node, promql_parser.Call):
            for arg in node.args:
                walk(arg)
        elif isinstance(
            node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
        ):
            walk(node.expr)
        elif not isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral):
            raise AssertionError(f"unhandled PromQL node {type(node).__name__} in {expr!r}")

    walk(promql_parser.parse(expr))
    return metrics, labels


def problems(expr, exported):
    """What in ``expr`` the code does not export (empty when all of it is)."""
    metrics, labels = referenced(expr)
    out = [f"metric {m} is not exported" for m in sorted(metrics - set(exported))]
    known = set(TARGET_LABELS)
    for metric in metrics & set(exported):
        known |= exported[metric]
    out += [
        f"label {label} is on none of {', '.join(sorted(metrics))}"
        for label in sorted(labels - known)
    ]
    return out


def all_queries():
    out = []
    for path in DASHBOARDS:
        out += dashboard_queries(path)
    for path in RULE_FILES:
        out += rule_queries(path)
    return out


# -- the checks ----------------------------------------------------------------


def test_there_is_something_to_check():
    assert DASHBOARDS and RULE_FILES
    assert len(all_queries()) >= 10


def test_every_query_reads_only_exported_metrics_and_labels(exported):
    failures = [
        f"{where}: {problem} ({expr})"
        for where, expr in all_queries()
        for problem in problems(expr, exported)
    ]
    assert not failures, "\n".join(failures)


def test_every_template_variable_reads_an_exported_label(exported):
    for path in DASHBOARDS:
        for where, selector, label in dashboard_variables(path):
            assert not problems(selector, exported), where
            metrics, _ = referenced(selector)
            assert any(label in exported[m] for m in metrics), f"{where}: no label {label}"


def test_the_issue_panels_and_alerts_are_there():
    """The power panels (per-family nodes and performance nodes, transitions
    applied and deferred, hp_count), the scheduler's decisions, NoValidHost by
    filter and races lost, the API's latency and errors, and the alerts for a
    controller that does not reconcile, NoValidHost rate and API 5xx."""
    read = set()
    for path in DASHBOARDS:
        for _, expr in dashboard_queries(path):
            read |= referenced(expr)[0]
    for metric in (
        "joulie_policy_family_nodes",
        "joulie_policy_family_performance_nodes",
        "joulie_policy_state_transitions_total",
        "joulie_policy_hp_count",
        "placement_api_requests_total",
        "placement_api_request_duration_seconds_bucket",
        "joule_scheduler_requests_total",
        "joule_scheduler_no_valid_host_by_filter_total",
        "joule_scheduler_races_lost_total",
    ):
        assert metric in read, metric
    alerts = {
        where.split(": ", 1)[1]: expr for path in RULE_FILES for where, expr in rule_queries(path)
    }
    assert (
        "joulie_policy_last_reconcile_success_timestamp_seconds"
        in referenced(alerts["PowerControllerNotReconciling"])[0]
    )
    metrics, labels = referenced(alerts["PlacementAPIServerErrors"])
    assert metrics == {"placement_api_requests_total"} and labels == {"status"}
    metrics, labels = referenced(alerts["SchedulerNoValidHost"])
    assert metrics == {"joule_scheduler_requests_total"} and labels == {"result"}


def test_the_checker_catches_drift(exported):
    # What a renamed metric or label would look like: the checks above are not vacuous.
    assert problems('sum by (family) (joulie_policy_family_nodes{famly="x"})', exported) == [
        "label famly is on none of joulie_policy_family_nodes"
    ]
    assert problems("joulie_policy_family_node", exported) == [
        "metric joulie_policy_family_node is not exported"
    ]
    assert problems("sum by (result) (rate(joulie_policy_reconciles_total[5m]))", exported) == [
        "label result is on none of joulie_policy_reconciles_total"
    ]
    assert problems(
        "x / on (family) group_left (outcome) joulie_policy_family_nodes", exported
    ) == ["metric x is not exported", "label outcome is on none of joulie_policy_family_nodes, x"]
    assert problems('{__name__="joulie_policy_hp_count", job="power"}', exported) == []
    # A histogram's buckets carry le; its count does not.
    assert (
        problems("sum by (le) (rate(placement_api_request_duration_seconds_bucket[5m]))", exported)
        == []
    )
    assert problems(
        "sum by (le) (rate(placement_api_request_duration_seconds_count[5m]))", exported
    ) == ["label le is on none of placement_api_request_duration_seconds_count"]
    # Counters are scraped with _total; the bare name is no series.
    assert problems("rate(joulie_policy_reconciles[5m])", exported) == [
        "metric joulie_policy_reconciles is not exported"
    ]
    assert problems("rate(joulie_policy_reconciles_total[5m])", exported) == []


def test_dashboards_are_well_formed():
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        ids = [p["id"] for p in _panels(board["panels"])]
        assert len(ids) == len(set(ids)), f"{path.name}: duplicate panel ids"
        assert board["uid"] and board["title"]
        for panel in _panels(board["panels"]):
            if panel["type"] != "row":  # every panel follows the data source variable
                assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def _promtool():
    path = shutil.which("promtool")
    if path is None:
        reason = "promtool is not installed (Debian package 'prometheus' provides it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires promtool (.ci/run fetches it): {reason}")
        pytest.skip(reason)
    return path


def test_promtool_checks_the_rule_files():
    promtool = _promtool()
    proc = subprocess.run(
        [promtool, "check", "rules", *map(str, RULE_FILES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_parses_every_panel_query(tmp_path):
    """Prometheus' own parser on the panel queries, as recording rules."""
    promtool = _promtool()
    queries = [q for path in DASHBOARDS for q in dashboard_queries(path)]
    rules = {
        "groups": [
            {
                "name": "dashboard_queries",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": expr}
                    for i, (_, expr) in enumerate(queries)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    proc = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(queries)} rules found" in proc.stdout
