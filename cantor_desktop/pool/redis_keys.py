"""Every key of a pool in its Redis database (one pool per database: ``/DB`` in the URL).

A song's record is a hash whose fields are the song's JSON fields, each JSON-encoded (a
change rewrites only its fields, and a script can quote the whole record into an event
without a JSON library), plus three private fields: the lane it waits in, its stream entry
and the node that holds it now.

Lanes are streams, each read by one consumer group (:data:`GROUP`), one consumer per node
(named by its id): a lane per model, which every member that can make that model reads, and
a lane per node for songs only that node can make (sent to it, or edits of files it holds).
"""

from __future__ import annotations

PREFIX = "cantor:"
GROUP = "cantor"
EVENTS = PREFIX + "events"
ORDER = PREFIX + "order"  # sorted set: song id by submission number
SEQ = PREFIX + "seq"
LANES = PREFIX + "lanes"  # set of every lane ever used
MEMBERS = PREFIX + "members"  # hash: node id -> its last heartbeat (JSON)
TOKEN_CHECK = PREFIX + "token-check"
EVENTS_MAXLEN = 20000
"""Events kept (approximately): a member that was away longer reloads the records."""

LANE_MODEL = PREFIX + "lane:model:"
LANE_NODE = PREFIX + "lane:node:"


def song(song_id: str) -> str:
    return PREFIX + "song:" + song_id


def alive(node_id: str) -> str:
    """Exists while the node's heartbeat is fresh (it expires by itself)."""
    return PREFIX + "alive:" + node_id


def model_lane(model: str) -> str:
    return LANE_MODEL + model


def node_lane(node_id: str) -> str:
    return LANE_NODE + node_id


def lane_label(lane: str) -> str:
    """A lane as people read it: ``model acestep-v15-turbo`` or ``node 3fa2…``."""
    if lane.startswith(LANE_MODEL):
        return "model " + lane[len(LANE_MODEL) :]
    if lane.startswith(LANE_NODE):
        return "node " + lane[len(LANE_NODE) :]
    return lane
