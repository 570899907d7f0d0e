"""The exit codes of every `cantor` command: 0 done, 1 failed (the reason is printed; no
node, an engine's failure), 2 bad input (the field or option is named)."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
