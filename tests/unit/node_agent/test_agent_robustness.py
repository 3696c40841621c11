"""The node agent on bad input and on a placement that lost its records:
a bad provider config is a config error (exit 2), never a traceback; a
registration that fails once the node is registered does not stop the
heartbeats; a deleted provider is found or created again; a RAPL zone
stating a 0 W maximum states none."""

import os

import pytest

from joule import placement_client
from node_agent import agent as agent_mod
from node_agent import cmd as cmd_mod
from node_agent import discovery
from node_agent import provider_config
from tests import node_trees
from tests.unit.node_agent import test_register_and_power as base

_HEAD = "meta: {schema_version: '1.0'}\nproviders:\n  - identification: {uuid: $COMPUTE_NODE}\n"


@pytest.mark.parametrize(
    "text,where",
    [
        ("meta: [1]\nproviders: []\n", "meta"),
        ("meta: {schema_version: '1.0'}\nproviders: {a: 1}\n", "providers"),
        (_HEAD + "    inventories: [CUSTOM_X]\n", "providers[0].inventories"),
        (_HEAD + "    inventories: {additional: {CUSTOM_X: {total: 1}}}\n", "additional"),
        (_HEAD + "    traits: [CUSTOM_A]\n", "providers[0].traits"),
        (_HEAD + "    traits: {additional: CUSTOM_A}\n", "providers[0].traits.additional"),
        (_HEAD + "    traits: {additional: [{CUSTOM_A: 1}]}\n", "traits.additional[0]"),
        (_HEAD + "    inventories: {additional: [{CUSTOM_X: {total: .inf}}]}\n", "finite"),
        (_HEAD + "    inventories: {additional: [{CUSTOM_X: {total: .nan}}]}\n", "finite"),
    ],
)
def test_a_provider_config_of_the_wrong_shape_is_a_config_error(tmp_path, text, where):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(provider_config.ProviderConfigError, match=where.replace("[", r"\[")):
        provider_config.load(str(path), "node-1")


def test_node_agent_exits_2_on_a_provider_config_of_the_wrong_shape(tmp_path, capsys):
    proc, sys_ = node_trees.write("bare", tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(_HEAD + "    inventories: [CUSTOM_X]\n")
    conf = tmp_path / "agent.conf"
    conf.write_text(
        f"[agent]\nprocfs_root = {proc}\nsysfs_root = {sys_}\nprovider_config = {path}\n"
        "gpus = false\n[placement]\nendpoint_override = http://127.0.0.1:9\n"
    )
    assert cmd_mod.main(["--config-file", str(conf), "--once"]) == 2
    err = capsys.readouterr().err
    assert "providers[0].inventories" in err and "Traceback" not in err


def test_a_provider_config_broken_after_start_does_not_stop_heartbeats(tmp_path, caplog):
    path = tmp_path / "p.yaml"
    path.write_text(_HEAD + "    traits: {additional: [CUSTOM_RACK_A]}\n")
    agent, fake, _sys, clock = base._agent("bare", tmp_path, provider_config=str(path))
    agent.run_pass()
    assert fake.nodes[agent.uuid]["heartbeat_at"] == "now"
    fake.nodes[agent.uuid]["heartbeat_at"] = None
    path.write_text(_HEAD + "    traits: {additional: [not_a_trait]}\n")
    clock.now += agent.opts.rediscover_interval + 1
    caplog.set_level("ERROR", logger="node_agent.agent")
    for _ in range(3):
        agent.run_pass()  # no exception: the pass goes on to its heartbeat
        assert fake.nodes[agent.uuid]["heartbeat_at"] == "now"
        fake.nodes[agent.uuid]["heartbeat_at"] = None
    said = [r.getMessage() for r in caplog.records if "heartbeats go on" in r.getMessage()]
    assert len(said) == 1 and "not_a_trait" in said[0]
    # Fixed: the next pass registers again.
    path.write_text(_HEAD + "    traits: {additional: [CUSTOM_RACK_B]}\n")
    agent.run_pass()
    assert "CUSTOM_RACK_B" in fake.providers[agent.uuid]["traits"]


def test_a_first_registration_that_fails_still_fails_the_pass(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(_HEAD + "    traits: {additional: [not_a_trait]}\n")
    agent, _fake, _sys, _clock = base._agent("bare", tmp_path, provider_config=str(path))
    with pytest.raises(provider_config.ProviderConfigError):
        agent.run_pass()


class _Placement(base.FakePlacement):
    """Answers for a deleted provider as placement does."""

    def _gone(self, u):
        if u not in self.providers:
            raise placement_client.NotFound(
                "GET", "/x", 404, "placement.resource_provider.not_found", "gone"
            )

    def heartbeat(self, u, twin_status=None):
        self._gone(u)
        return super().heartbeat(u, twin_status)

    def get_inventories(self, u):
        self._gone(u)
        return super().get_inventories(u)


def test_a_deleted_provider_is_registered_again(tmp_path):
    proc, sys_ = node_trees.write("bare", tmp_path)
    conf = base._conf(proc, sys_)
    fake = _Placement()
    agent = agent_mod.Agent(conf, fake, nvml=node_trees.FakeNvml([]), clock=base.Clock())
    agent.run_pass()
    old = agent.uuid
    # An operator deletes the provider (and with it the node record).
    del fake.providers[old]
    fake.nodes.pop(old)
    with pytest.raises(placement_client.NotFound):
        agent.run_pass()
    agent.run_pass()
    assert agent.uuid != old and agent.uuid in fake.providers
    assert fake.nodes[agent.uuid]["heartbeat_at"] == "now"


def test_a_zero_maximum_states_no_maximum(tmp_path):
    proc, sys_ = node_trees.write("intel", tmp_path)
    for pkg in (0, 1):
        zone = os.path.join(sys_, "class", "powercap", f"intel-rapl:{pkg}")
        with open(os.path.join(zone, "constraint_0_max_power_uw"), "w") as fh:
            fh.write("0\n")
    node = discovery.discover(proc, sys_, nvml=node_trees.FakeNvml([]))
    assert node.cpu_cap_range() == (None, None)  # not (None, 0.0)
    from node_agent import power as power_mod

    power = power_mod.Power(node)
    # A cap goes in (no maximum to check it against) ...
    status = power.status({"generation": 0, "profile": "eco", "cpu_cap_watts": 200.0})
    assert status["cpu"]["result"] == "applied"
    assert node_trees.rapl_limit(sys_, 0) == 100_000_000
    # ... and uncapping does not write a 0 W limit.
    status = power.status({"generation": 1, "profile": "performance", "cpu_cap_watts": None})
    assert status["cpu"]["result"] == "failed"
    assert node_trees.rapl_limit(sys_, 0) == 100_000_000


def test_a_status_placement_refuses_does_not_stop_the_heartbeat(tmp_path, caplog):
    # A reading past the schema's bounds (or any status placement will not
    # store) is logged; the node still reports in, so it does not go down.
    agent, fake, _sys, _clock = base._agent("bare", tmp_path)
    agent.run_pass()
    real = fake.heartbeat

    def picky(u, twin_status=None):
        if twin_status is not None:
            raise placement_client.BadRequest(
                "POST", "/h", 400, "placement.undefined_code", "watts: 2000000 is too large"
            )
        return real(u, twin_status)

    fake.heartbeat = picky
    fake.nodes[agent.uuid]["heartbeat_at"] = None
    caplog.set_level("WARNING", logger="node_agent.agent")
    agent.status = {"profile": "performance"}
    agent._heartbeat(agent.status)
    assert fake.nodes[agent.uuid]["heartbeat_at"] == "now"
    assert any("refused the twin status" in r.getMessage() for r in caplog.records)
