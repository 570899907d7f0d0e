"""The `cantor` command line: a thin shell over the core modules."""
