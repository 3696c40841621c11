"""``placement-sim``: a day of a cluster through the real services, on a simulated clock.

A composition package like ``placement_demo``: it drives placement (in
process, embedded SQLite), the scheduler, the conductor and the power
controller through their own entry points, and adds only what a real cluster
would provide: a workload (``workload``), node power (``power``) and a clock
(``engine``).
"""
