"""Cantor Desktop: make songs with ACE-Step on your own machine."""

__version__ = "0.1.0"
