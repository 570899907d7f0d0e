"""Talking to a node: the HTTP client, starting a node of one's own, the link's state."""
