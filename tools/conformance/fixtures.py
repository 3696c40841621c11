"""Gabbi fixtures for running upstream Placement's gabbits against our app.

Gabbi finds a YAML file's ``fixtures:`` by class name in this module, so the
classes carry upstream's names (APIFixture, AllocationFixture, ...). Each one
builds the same provider trees and exports the same ``$ENVIRON`` variables as
upstream's fixtures (their docstrings draw the trees), but with our own code:
a fresh database from :mod:`tools.conformance.backend`, rows written through
``tests/builders.py`` plus a few direct inserts where upstream's semantics
differ from the builders (aggregates set at creation time do not bump the
provider generation upstream; a consumer's first allocation does bump the
consumer generation), and our app from ``placement.app.create_app``.

The runner calls :func:`configure` once before any suite runs; gabbi calls
:func:`setup_app` while it builds the tests, before any fixture has started,
so the WSGI callable it gets only dispatches to whichever app the running
fixture has built.
"""

import os
import uuid

import sqlalchemy as sa
import yaml
from gabbi import fixture as gabbi_fixture
from oslo_middleware import cors as cors_mw
from oslo_policy import opts as policy_opts

from placement import app as app_mod
from placement import conf as conf_mod
from placement import db as db_mod
from placement import models
from placement import policies
from tests import builders

# Set by configure(): the backend that hands out clean databases, and a
# scratch directory for policy files.
_BACKEND = None
_WORKDIR = None
# The app of the suite that is running now (None between suites).
_CURRENT = {"app": None}


def configure(backend, workdir):
    global _BACKEND, _WORKDIR
    _BACKEND = backend
    _WORKDIR = workdir


class _DispatchApp:
    """WSGI callable that forwards to the running suite's app."""

    def __call__(self, environ, start_response):
        app = _CURRENT["app"]
        # httpx's WSGI transport puts the percent-decoded path into PATH_INFO as
        # text; PEP 3333 (and every real server) gives the UTF-8 bytes as latin-1.
        path = environ.get("PATH_INFO", "")
        if not path.isascii():
            environ["PATH_INFO"] = path.encode("utf-8").decode("latin-1")
        if app is None:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"conformance harness: no fixture is running"]
        return app(environ, start_response)


def setup_app():
    """Gabbi's ``intercept`` factory."""
    return _DispatchApp()


def _new_uuid():
    return str(uuid.uuid4())


class APIFixture(gabbi_fixture.GabbiFixture):
    """A clean database and an app with noauth2 and the default policy."""

    # Upstream's [oslo_policy] enforce_new_defaults / enforce_scope for this fixture.
    secure_rbac = False

    def start_fixture(self):
        self._saved_env = dict(os.environ)
        self.db_url = _BACKEND.fresh_database()
        self.db = db_mod.Database(self.db_url)
        db_mod.sync_standard_classes_and_traits(self.db)
        self.conf = self._make_conf()
        self._export_common_environ()
        self.populate()
        _CURRENT["app"] = app_mod.create_app(self.conf, db=self.db, sync=False)

    def stop_fixture(self):
        _CURRENT["app"] = None
        if getattr(self, "db", None) is not None:
            self.db.dispose()
        # Leave no variable of this file for the next one.
        os.environ.clear()
        os.environ.update(self._saved_env)

    # -- configuration ---------------------------------------------------

    def _make_conf(self):
        conf = conf_mod.make_conf(
            overrides={
                ("placement_database", "connection"): self.db_url,
                ("api", "auth_strategy"): "noauth2",
                # gabbi's intercept addresses every file to a random host name
                # (and tests check absolute Location headers built from it): serve
                # foreign names, as a deployment beyond loopback would.
                ("api", "allow_insecure_noauth"): True,
            }
        )
        # The [oslo_policy] options exist once an Enforcer registers them; register
        # them now so the RBAC fixtures can set them before the app is built.
        policy_opts.set_defaults(conf)
        conf.set_override("enforce_new_defaults", self.secure_rbac, group="oslo_policy")
        if "enforce_scope" in conf.oslo_policy:  # oslo.policy >= 6 always checks scope
            conf.set_override("enforce_scope", self.secure_rbac, group="oslo_policy")
        # A policy file that does not exist: only the registered defaults apply, and no
        # stray policy.yaml of the machine can change the verdicts.
        conf.set_override(
            "policy_file", os.path.join(_WORKDIR, "no-such-policy.yaml"), group="oslo_policy"
        )
        self.configure(conf)
        return conf

    def configure(self, conf):
        """Hook: subclasses adjust the configuration here."""

    def _export_common_environ(self):
        env = os.environ
        for name in (
            "RP_UUID",
            "RP_NAME",
            "RP_UUID1",
            "RP_NAME1",
            "RP_UUID2",
            "RP_NAME2",
            "PROJECT_ID",
            "ADMIN_PROJECT_ID",
            "SERVICE_PROJECT_ID",
            "USER_ID",
            "PROJECT_ID_ALT",
            "USER_ID_ALT",
            "INSTANCE_UUID",
            "MIGRATION_UUID",
            "CONSUMER_UUID",
            "PARENT_PROVIDER_UUID",
            "ALT_PARENT_PROVIDER_UUID",
        ):
            env[name] = _new_uuid()
        env["CUSTOM_RES_CLASS"] = "CUSTOM_IRON_NFV"
        env["CUSTOM_RES_CLASS1"] = "CUSTOM_IRON_NFV1"
        env["CUSTOM_RES_CLASS2"] = "CUSTOM_IRON_NFV2"

    # -- data ------------------------------------------------------------

    def populate(self):
        """Hook: subclasses create their providers here."""

    def provider(self, name, *aggregates, parent=None, uuid=None):
        rp_uuid = builders.create_provider(
            self.db, name=name, uuid=uuid or _new_uuid(), parent_uuid=parent
        )
        if aggregates:
            self.aggregates(rp_uuid, *aggregates)
        return rp_uuid

    def aggregates(self, rp_uuid, *agg_uuids):
        """Associate aggregates without bumping the generation (as upstream's fixtures)."""
        agg = models.placement_aggregates
        rpa = models.resource_provider_aggregates
        rp = models.resource_providers
        with self.db.write() as conn:
            rp_id = conn.execute(sa.select(rp.c.id).where(rp.c.uuid == rp_uuid)).scalar_one()
            conn.execute(rpa.delete().where(rpa.c.resource_provider_id == rp_id))
            for agg_uuid in agg_uuids:
                agg_id = conn.execute(
                    sa.select(agg.c.id).where(agg.c.uuid == agg_uuid)
                ).scalar_one_or_none()
                if agg_id is None:
                    agg_id = conn.execute(agg.insert().values(uuid=agg_uuid)).inserted_primary_key[
                        0
                    ]
                conn.execute(rpa.insert().values(resource_provider_id=rp_id, aggregate_id=agg_id))

    def inventory(self, rp_uuid, resource_class, total, **kwargs):
        builders.set_inventory(self.db, rp_uuid, resource_class, total, **kwargs)

    def traits(self, rp_uuid, *names):
        builders.set_traits(self.db, rp_uuid, *names)

    def custom_class(self, name):
        builders.ensure_resource_class(self.db, name)

    def user_and_project(self, user, project):
        """Create the user and project rows (upstream's fixtures create them up front)."""
        with self.db.write() as conn:
            for table, external_id in ((models.users, user), (models.projects, project)):
                found = conn.execute(
                    sa.select(table.c.id).where(table.c.external_id == external_id)
                ).first()
                if found is None:
                    conn.execute(table.insert().values(external_id=external_id))

    def allocate(self, rp_uuid, resources, project, user, consumer=None):
        """A new consumer holding ``resources`` on one provider; returns its uuid.

        Written through the API's claim path: the consumer ends at generation 1
        and the provider generation moves once.
        """
        consumer = consumer or _new_uuid()
        builders.allocate(self.db, consumer, {rp_uuid: resources}, project=project, user=user)
        return consumer


class AllocationFixture(APIFixture):
    """One provider (VCPU 10, DISK_GB 2048) and three consumers of it.

    CONSUMER_0 holds DISK_GB 1000 and CONSUMER_ID holds VCPU 6 (both
    PROJECT_ID/USER_ID); ALT_CONSUMER_ID holds DISK_GB 20 + VCPU 1 for
    ALT_USER_ID. ALT_RP_UUID/ALT_RP_NAME name a provider that does not exist.
    """

    def populate(self):
        env = os.environ
        env["ALT_USER_ID"] = _new_uuid()
        project, user, alt_user = env["PROJECT_ID"], env["USER_ID"], env["ALT_USER_ID"]
        self.user_and_project(user, project)
        self.user_and_project(alt_user, project)

        rp = self.provider(env["RP_NAME"], uuid=env["RP_UUID"])
        self.inventory(rp, "DISK_GB", 2048, step_size=10, min_unit=10, max_unit=1000)
        self.inventory(rp, "VCPU", 10, max_unit=10)

        env["CONSUMER_0"] = self.allocate(rp, {"DISK_GB": 1000}, project, user)
        env["CONSUMER_ID"] = self.allocate(rp, {"VCPU": 6}, project, user)
        env["ALT_CONSUMER_ID"] = self.allocate(rp, {"DISK_GB": 20, "VCPU": 1}, project, alt_user)
        env["ALT_RP_UUID"] = _new_uuid()
        env["ALT_RP_NAME"] = _new_uuid()


class SharedStorageFixture(APIFixture):
    """cn1 (VCPU, RAM, SSE traits) and cn2 (VCPU, RAM, DISK) sharing two storage
    providers ss/ss2 through one aggregate; each compute node has two NUMA
    children with one PF (SRIOV_NET_VF 8) each."""

    def populate(self):
        env = os.environ
        agg = env["AGG_UUID"] = _new_uuid()
        cn1 = env["CN1_UUID"] = self.provider("cn1", agg)
        cn2 = env["CN2_UUID"] = self.provider("cn2", agg)
        ss = env["SS_UUID"] = self.provider("ss", agg)
        ss2 = env["SS2_UUID"] = self.provider("ss2", agg)
        pfs = []
        for c, cn in ((1, cn1), (2, cn2)):
            for n in (1, 2):
                numa = env[f"NUMA{c}_{n}_UUID"] = self.provider(f"numa{c}_{n}", parent=cn)
                pf = env[f"PF{c}_{n}_UUID"] = self.provider(f"pf{c}_{n}", parent=numa)
                pfs.append(pf)
        for cn in (cn1, cn2):
            self.inventory(cn, "VCPU", 24, allocation_ratio=16.0)
            self.inventory(cn, "MEMORY_MB", 128 * 1024, allocation_ratio=1.5)
        self.traits(cn1, "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2")
        self.inventory(cn2, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
        for shared in (ss, ss2):
            self.inventory(shared, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            self.traits(shared, "MISC_SHARES_VIA_AGGREGATE")
        for pf in pfs:
            self.inventory(pf, "SRIOV_NET_VF", 8, allocation_ratio=1.0)


class NUMAAggregateFixture(APIFixture):
    """Two resourceless compute nodes with two NUMA children (VCPU 24) each;
    ss1 shares DISK_GB with both through aggA, ss2 with numa1_1 through aggC."""

    def populate(self):
        env = os.environ
        agg_a = env["AGGA_UUID"] = _new_uuid()
        agg_b = env["AGGB_UUID"] = _new_uuid()
        agg_c = env["AGGC_UUID"] = _new_uuid()
        cn1 = env["CN1_UUID"] = self.provider("cn1", agg_a)
        cn2 = env["CN2_UUID"] = self.provider("cn2", agg_a, agg_b)
        ss1 = env["SS1_UUID"] = self.provider("ss1", agg_a)
        ss2 = env["SS2_UUID"] = self.provider("ss2", agg_c)
        numas = [
            self.provider("numa1_1", agg_c, parent=cn1),
            self.provider("numa1_2", parent=cn1),
            self.provider("numa2_1", parent=cn2),
            self.provider("numa2_2", parent=cn2),
        ]
        env["NUMA1_1_UUID"], env["NUMA1_2_UUID"], env["NUMA2_1_UUID"], env["NUMA2_2_UUID"] = numas
        for numa in numas:
            self.inventory(numa, "VCPU", 24, allocation_ratio=16.0)
        for ss in (ss1, ss2):
            self.inventory(ss, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            self.traits(ss, "MISC_SHARES_VIA_AGGREGATE")


class NUMANetworkFixture(APIFixture):
    """cn1: no inventory, two NUMA children (VCPU, MEMORY_MB; FPGA/VGPU
    grandchildren), an SR-IOV agent with two bandwidth devices and an OVS agent
    with br_int. cn2: VCPU/MEMORY_MB/DISK_GB itself and three NIC roots with
    VF-providing PFs on PHYSNET1/2. ss1 shares DISK_GB with both via aggA.
    Consumers of user numafx-user hold VCPU 2 on numa0 and VCPU 3 on cn2."""

    # DeepNUMANetworkFixture creates cn1/cn2 under parents before this runs.
    cn1 = None
    cn2 = None

    def populate(self):
        env = os.environ
        agg_a = env["AGGA_UUID"] = _new_uuid()
        user, project = "numafx-user", "numafx-project"
        self.user_and_project(user, project)

        ss1 = env["SS1_UUID"] = self.provider("ss1", agg_a)
        self.traits(ss1, "MISC_SHARES_VIA_AGGREGATE")
        self.inventory(ss1, "DISK_GB", 2000)

        cn1 = self.cn1 or self.provider("cn1")
        self.aggregates(cn1, agg_a)
        self.traits(cn1, "COMPUTE_VOLUME_MULTI_ATTACH")
        env["CN1_UUID"] = cn1

        numa0 = env["NUMA0_UUID"] = self.provider("numa0", parent=cn1)
        self.traits(numa0, "HW_NUMA_ROOT")
        self.inventory(numa0, "VCPU", 4)
        numa1 = env["NUMA1_UUID"] = self.provider("numa1", parent=cn1)
        self.traits(numa1, "HW_NUMA_ROOT", "CUSTOM_FOO")
        self.inventory(numa1, "VCPU", 4)
        self.inventory(numa0, "MEMORY_MB", 2048, min_unit=512, step_size=256)
        self.inventory(numa1, "MEMORY_MB", 2048, min_unit=256, max_unit=1024)
        self.allocate(numa0, {"VCPU": 2}, project, user)

        fpga0 = env["FPGA0_UUID"] = self.provider("fpga0", parent=numa0)
        self.inventory(fpga0, "FPGA", 1)
        pgpu0 = env["PGPU0_UUID"] = self.provider("pgpu0", parent=numa0)
        self.inventory(pgpu0, "VGPU", 8)
        for i in (0, 1):
            fpga = env[f"FPGA1_{i}_UUID"] = self.provider(f"fpga1_{i}", parent=numa1)
            self.inventory(fpga, "FPGA", 1)

        sriov = env["SRIOV_AGENT_UUID"] = self.provider("sriov_agent", parent=cn1)
        self.traits(sriov, "CUSTOM_VNIC_TYPE_DIRECT")
        for i in (1, 2):
            esn = env[f"ESN{i}_UUID"] = self.provider(f"esn{i}", parent=sriov)
            self.traits(esn, f"CUSTOM_PHYSNET{i}")
            self.inventory(esn, "NET_BW_EGR_KILOBIT_PER_SEC", 10000 * i)
        ovs = env["OVS_AGENT_UUID"] = self.provider("ovs_agent", parent=cn1)
        self.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
        br_int = env["BR_INT_UUID"] = self.provider("br_int", parent=ovs)
        self.traits(br_int, "CUSTOM_PHYSNET0")
        self.inventory(br_int, "NET_BW_EGR_KILOBIT_PER_SEC", 1000)

        cn2 = self.cn2 or self.provider("cn2")
        self.aggregates(cn2, agg_a)
        self.inventory(cn2, "VCPU", 8)
        self.allocate(cn2, {"VCPU": 3}, project, user)
        self.inventory(cn2, "MEMORY_MB", 2048, min_unit=1024, step_size=128)
        self.inventory(cn2, "DISK_GB", 1000)
        self.traits(cn2, "CUSTOM_FOO")
        env["CN2_UUID"] = cn2

        nics = []
        for i in (1, 2, 3):
            nic = env[f"NIC{i}_UUID"] = self.provider(f"nic{i}", parent=cn2)
            self.traits(nic, "CUSTOM_HW_NIC_ROOT")
            nics.append(nic)
        # (nic, pf suffix, physnet, VFs)
        pfs = [
            (0, "1_1", 1, 4),
            (0, "1_2", 2, 4),
            (1, "2_1", 1, 2),
            (1, "2_2", 2, 2),
            (1, "2_3", 1, 2),
            (1, "2_4", 2, 2),
            (2, "3_1", 1, 8),
        ]
        for nic_index, suffix, physnet, vfs in pfs:
            pf = env[f"PF{suffix}_UUID"] = self.provider(f"pf{suffix}", parent=nics[nic_index])
            self.traits(pf, f"CUSTOM_PHYSNET{physnet}")
            self.inventory(pf, "CUSTOM_VF", vfs)


class DeepNUMANetworkFixture(NUMANetworkFixture):
    """NUMANetworkFixture with cn1 under gp1/p1 and cn2 under gp1/p2."""

    def populate(self):
        gp1 = self.provider("gp1")
        p1 = self.provider("p1", parent=gp1)
        p2 = self.provider("p2", parent=gp1)
        self.cn1 = self.provider("cn1", parent=p1)
        self.cn2 = self.provider("cn2", parent=p2)
        super().populate()


class NonSharedStorageFixture(APIFixture):
    """Three compute nodes with VCPU 24, MEMORY_MB 128G, DISK_GB 2000, no sharing."""

    def populate(self):
        env = os.environ
        for name in ("AGGA_UUID", "AGGB_UUID", "AGGC_UUID"):
            env[name] = _new_uuid()
        for i in (1, 2, 3):
            cn = env[f"CN{i}_UUID"] = self.provider(f"cn{i}")
            self.inventory(cn, "VCPU", 24)
            self.inventory(cn, "MEMORY_MB", 128 * 1024)
            self.inventory(cn, "DISK_GB", 2000)


class CORSFixture(APIFixture):
    """CORS allowed for http://valid.example.com with the microversion header."""

    def configure(self, conf):
        # Register the [cors] options now (oslo.middleware's own definitions, which
        # the app registers again harmlessly) so they can be set before create_app.
        conf.register_opts(cors_mw.CORS_OPTS, group="cors")
        conf.set_override("allowed_origin", ["http://valid.example.com"], group="cors")
        conf.set_override("allow_headers", ["openstack-api-version"], group="cors")


class GranularFixture(APIFixture):
    """cn_left, cn_middle, cn_right with varied inventory/traits; shr_disk_1 and
    shr_disk_2 share DISK_GB via aggA (shr_disk_2 also aggB); shr_net shares
    SRIOV_NET_VF and CUSTOM_NET_MBPS via aggC."""

    def populate(self):
        env = os.environ
        self.custom_class("CUSTOM_NET_MBPS")
        agg_a = env["AGGA"] = _new_uuid()
        agg_b = env["AGGB"] = _new_uuid()
        agg_c = env["AGGC"] = _new_uuid()

        left = env["CN_LEFT"] = self.provider("cn_left", agg_a)
        for rc, total in (
            ("VCPU", 8),
            ("MEMORY_MB", 4096),
            ("DISK_GB", 500),
            ("VGPU", 8),
            ("SRIOV_NET_VF", 8),
            ("CUSTOM_NET_MBPS", 4000),
        ):
            self.inventory(left, rc, total)
        self.traits(
            left,
            "HW_CPU_X86_AVX",
            "HW_CPU_X86_AVX2",
            "HW_GPU_API_DXVA",
            "HW_NIC_DCB_PFC",
            "CUSTOM_FOO",
        )

        middle = env["CN_MIDDLE"] = self.provider("cn_middle", agg_a, agg_b)
        for rc, total in (
            ("VCPU", 8),
            ("MEMORY_MB", 4096),
            ("SRIOV_NET_VF", 8),
            ("CUSTOM_NET_MBPS", 4000),
        ):
            self.inventory(middle, rc, total)
        self.traits(
            middle, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_CPU_X86_SSE", "HW_NIC_ACCEL_TLS"
        )

        right = env["CN_RIGHT"] = self.provider("cn_right", agg_b, agg_c)
        for rc, total in (("VCPU", 8), ("MEMORY_MB", 4096), ("DISK_GB", 500)):
            self.inventory(right, rc, total)
        self.inventory(right, "VGPU", 8, max_unit=2)
        self.traits(right, "HW_CPU_X86_MMX", "HW_GPU_API_DXVA", "CUSTOM_DISK_SSD")

        disk1 = env["SHR_DISK_1"] = self.provider("shr_disk_1", agg_a)
        self.inventory(disk1, "DISK_GB", 1000)
        self.traits(disk1, "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_DISK_SSD")
        disk2 = env["SHR_DISK_2"] = self.provider("shr_disk_2", agg_a, agg_b)
        self.inventory(disk2, "DISK_GB", 1000)
        self.traits(disk2, "MISC_SHARES_VIA_AGGREGATE")
        net = env["SHR_NET"] = self.provider("shr_net", agg_c)
        self.inventory(net, "SRIOV_NET_VF", 16)
        self.inventory(net, "CUSTOM_NET_MBPS", 40000)
        self.traits(net, "MISC_SHARES_VIA_AGGREGATE")


class OpenPolicyFixture(APIFixture):
    """Every placement rule except the base admin_api rule is open to anyone ('@')."""

    def configure(self, conf):
        rules = {rule.name: "@" for rule in policies.list_rules() if rule.name != "admin_api"}
        path = os.path.join(_WORKDIR, "open-policy.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(rules, f)
        conf.set_override("policy_file", path, group="oslo_policy")


class SecureRBACPolicyFixture(APIFixture):
    """The new policy defaults with scope checks ([oslo_policy] enforce_*=True)."""

    secure_rbac = True


class LegacyRBACPolicyFixture(APIFixture):
    """The deprecated policy defaults (explicitly, though it is the default)."""

    secure_rbac = False


class NeutronQoSMultiSegmentFixture(APIFixture):
    """Four compute trees (compute0-3), each with an OVS agent (packet rate) over
    br-ex bridges and an SR-IOV agent over PFs (bandwidth), on physnets:
    compute0 OTHER, compute1 MSN_S1, compute2 MSN_S2, compute3 both (with
    small bandwidth)."""

    VNIC_DIRECT = (
        "CUSTOM_VNIC_TYPE_DIRECT",
        "CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL",
        "CUSTOM_VNIC_TYPE_MACVTAP",
    )

    def _bandwidth(self, rp_uuid, kbps):
        self.inventory(rp_uuid, "NET_BW_EGR_KILOBIT_PER_SEC", kbps)
        self.inventory(rp_uuid, "NET_BW_IGR_KILOBIT_PER_SEC", kbps)

    def populate(self):
        env = os.environ
        trees = [
            # (compute, [(bridge, physnet)], [(pf, physnet)], bandwidth of br / pf)
            ("compute0", [("br-ex", "OTHER")], [("enp129s0f0", "OTHER")], 5000, 10000),
            ("compute1", [("br-ex", "MSN_S1")], [("enp129s0f0", "MSN_S1")], 5000, 10000),
            ("compute2", [("br-ex", "MSN_S2")], [("enp129s0f0", "MSN_S2")], 5000, 10000),
            (
                "compute3",
                [("br-ex", "MSN_S1"), ("br-ex2", "MSN_S2")],
                [("enp129s0f0", "MSN_S1"), ("enp129s0f1", "MSN_S2")],
                1000,
                1000,
            ),
        ]
        for name, bridges, pfs, br_kbps, pf_kbps in trees:
            compute = env[name] = self.provider(name)
            self.inventory(compute, "VCPU", 8)
            self.inventory(compute, "MEMORY_MB", 4096)
            self.inventory(compute, "DISK_GB", 500)

            ovs = env[f"{name}:ovs_agent"] = self.provider(
                f"{name}:Open vSwitch agent", parent=compute
            )
            self.inventory(ovs, "NET_PACKET_RATE_KILOPACKET_PER_SEC", 1000)
            self.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
            for bridge, physnet in bridges:
                br = env[f"{name}:{bridge.replace('-', '_')}"] = self.provider(
                    f"{name}:Open vSwitch agent:{bridge}", parent=ovs
                )
                self._bandwidth(br, br_kbps)
                self.traits(br, "CUSTOM_VNIC_TYPE_NORMAL", f"CUSTOM_PHYSNET_{physnet}")

            sriov = env[f"{name}:sriov_agent"] = self.provider(
                f"{name}:NIC Switch agent", parent=compute
            )
            self.traits(sriov, *self.VNIC_DIRECT)
            for index, (pf_name, physnet) in enumerate(pfs):
                pf = env[f"{name}:pf{index}"] = self.provider(
                    f"{name}:NIC Switch agent:{pf_name}", parent=sriov
                )
                self._bandwidth(pf, pf_kbps)
                self.traits(pf, *self.VNIC_DIRECT, f"CUSTOM_PHYSNET_{physnet}")
