"""This node in a pool: membership, heartbeat, the queue's mirror (with its outbox of changes
and its hub of events), the feeder, and asking other members."""
