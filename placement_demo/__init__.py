"""``placement-demo``: the whole system in one process, for a first look.

The one composition root of the repository: it starts placement in-process,
ticks the power controller and runs the conductor (with its scheduler), so it
is the only module outside the tests that may import every service.
"""
