"""Who may talk to a node: its token (kept by the OS) and the proof that a node holds it."""
