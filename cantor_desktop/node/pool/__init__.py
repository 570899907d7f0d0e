"""This node in a pool: membership, heartbeat, the queue's mirror, the feeder, and asking other members."""
