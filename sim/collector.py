"""The cyclic garbage collector paused while a large structure is built."""

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """Within: no cyclic collection. Building a large acyclic structure (a decoded trace, a
    run's records and events) allocates by the million and frees by reference counting; the
    collector's passes over the growing heap would find nothing, and on a big trace they are a
    third of the time. Restores the collector's state, even after an error."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
