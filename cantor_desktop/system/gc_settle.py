"""Short pauses from Python's cyclic garbage collector in a process that lives long.

A full collection walks every object the process holds, with the GIL held. The node holds
~80,000 once it is up (modules, the web app, its routes); the app as many after start-up,
and 10,000 songs add ~90,000 more. A full collection then took 100+ ms: on the node, after
each song; on the app's GUI thread, during a search keystroke.

Once a process has made what it keeps, :func:`settle` collects the garbage there is and
moves everything alive out of the collector's sight for good (``gc.freeze``): later
collections look only at what was made after it. Frozen objects are still freed when their
last reference goes; only one that becomes part of a garbage cycle after it was frozen
stays, so settle when what exists is meant to last.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """A full collection (no garbage is frozen), then everything alive frozen. Returns the
    number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
