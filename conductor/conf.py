"""oslo.config options of the conductor ([conductor]); it also reads the
scheduler's [filter_scheduler] and [placement_client], since it embeds the
scheduler in its process."""

from oslo_config import cfg

from scheduler import conf as sconf

conductor_group = cfg.OptGroup("conductor", title="Conductor")

conductor_opts = [
    cfg.StrOpt(
        "compute_driver",
        default="simulated",
        choices=[("simulated", "Builds succeed instantly unless a failure is injected.")],
        help="The compute driver that builds instances on their hosts.",
    ),
    cfg.FloatOpt(
        "simulated_failure_rate",
        default=0.0, min=0.0, max=1.0,
        help="simulated driver: probability that any build fails (exercises the move "
        "to alternates).",
    ),
    cfg.ListOpt(
        "simulated_failing_hosts",
        default=[],
        help="simulated driver: host names or uuids on which every build fails.",
    ),
    cfg.IntOpt(
        "simulated_seed",
        default=None,
        help="simulated driver: seed of the failure draws, for reproducible runs.",
    ),
    cfg.BoolOpt(
        "resume_pending",
        default=True,
        help="At start-up, finish the build requests a previous conductor left pending "
        "(releasing any claim they hold and scheduling them afresh).",
    ),
]


def register_opts(conf):
    sconf.register_opts(conf)
    conf.register_group(cfg.OptGroup(conductor_group.name, title=conductor_group.title))
    conf.register_opts(conductor_opts, group=conductor_group.name)


def list_opts():
    return [(conductor_group, conductor_opts)] + sconf.list_opts()
