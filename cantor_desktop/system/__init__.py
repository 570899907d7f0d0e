"""The operating system's part: folders, the keyring, processes, sockets, logs."""
