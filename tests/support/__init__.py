"""Test helpers shared by Cantor's test suites (real servers on 127.0.0.1, no mocks)."""
