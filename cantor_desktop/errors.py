"""The one root of Cantor's own errors: each carries a message written for the person using
Cantor (what went wrong, and what to do), which the app and the CLI show as it is."""

from __future__ import annotations


class CantorError(Exception):
    """An error whose message is meant for the user as it stands."""

    @property
    def user_message(self) -> str:
        return str(self).strip() or type(self).__name__
