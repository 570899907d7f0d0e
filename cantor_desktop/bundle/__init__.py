"""The frozen app: its entry point and its self-test."""
