"""The node's HTTP routes, one module per resource."""
