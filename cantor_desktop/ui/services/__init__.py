"""The link's services: each one part of what the app asks of its node, with its own state
and signals (see :mod:`cantor_desktop.ui.node_link`, which holds them together)."""
