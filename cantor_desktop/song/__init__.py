"""A song: its record, its request and their rules, edits, lyrics, keys, analysis."""
