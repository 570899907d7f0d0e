"""A pool of nodes behind one queue on Redis (no server code, no Qt).

Nodes started with a pool URL (``cantor node --pool redis://HOST:6379/0`` or ``[pool] url``
in node.toml) share one song queue, the song records and their events through Redis
Streams and one consumer group; without a pool URL the node's embedded queue is the whole
truth, as before. This package holds what the node and the CLI share: the pool's address
and its secrets (:mod:`.address`, :mod:`.credentials`), the connection (:mod:`.link`), the
names of every key and the scripts that change them atomically (:mod:`.keys`,
:mod:`.scripts`) and the pool's state as people read it (:mod:`.status`). The node's side
(the queue, taking songs, leases, members) is in :mod:`cantor_desktop.node`.
"""
