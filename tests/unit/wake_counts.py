"""How often each thread waits on a batcher's per-caller wake-up.

Both batchers (conductor.batch, scheduler.batcher) give every caller a
``joule.waiting_callers.Caller`` with its own ``wake`` event, so that a
finished flush wakes its own callers and one next leader, never every
waiting thread. A test swaps in this counting ``Caller`` to see that a
caller waits a few times, not once per flush.
"""

import collections
import contextlib
import threading

from joule import waiting_callers


@contextlib.contextmanager
def counting_waits():
    """Within the block, every Caller's wake-ups count each thread's waits;
    yields the Counter (thread id -> waits)."""
    waits = collections.Counter()
    real_call = waiting_callers.Caller

    class CountingCall(real_call):
        __slots__ = ()

        def __init__(self, count):
            super().__init__(count)
            wait = self.wake.wait
            me = threading.get_ident()

            def counted(timeout=None):
                waits[me] += 1
                return wait(timeout)

            self.wake.wait = counted

    waiting_callers.Caller = CountingCall
    try:
        yield waits
    finally:
        waiting_callers.Caller = real_call


def callers_at_once(count, call):
    """Run ``call(n)`` for n in range(count) on as many threads, released
    together, with their waits counted; return (the waits Counter,
    whether every caller returned within 30 s)."""
    start = threading.Barrier(count)

    def caller(n):
        start.wait(10)
        call(n)

    with counting_waits() as waits:
        threads = [threading.Thread(target=caller, args=(n,)) for n in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    return waits, not any(t.is_alive() for t in threads)
