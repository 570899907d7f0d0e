"""A node proves that it holds the token before a client sends it the token.

Whatever answers on a node's port may not be the node: while this home's node is stopped,
any program of any account can listen there and answer ``/v1/health`` like one. So a client
never sends the token first. It sends a fresh random challenge to the tokenless health
check, ``GET /v1/health?challenge=HEX``; the node answers with HMAC-SHA256 under the token of
:data:`LABEL`, the port the node answered on and the challenge; the client computes the same
with the token it found itself and compares in constant time. Only a node that answers right
gets requests with the token. Anything else is a stranger: named to the user, never sent the
token, never shadowed by a second node.

The port is in the MAC so that a stranger on this home's port cannot relay the challenge
to this home's node on another port (a private one) and pass its answer off as its own.

A member of a pool proves more: that it is the member with its id at the address it
advertises to the pool (``member_proof``, a MAC of :data:`MEMBER_LABEL`, its id, that whole
address and the challenge). The members' addresses come from Redis, so a record naming another host can
send a member anywhere; a node there that relays the challenge to a real member gets back
a MAC of that member's own address, which is no proof for the address in the record.

Shared by the node (:func:`answer`) and its clients (:func:`new_challenge`, :func:`verify`);
no server code, no Qt.
"""

from __future__ import annotations

import os
import re

LABEL = b"cantor node proof v1\x00"
"""Domain separation: this MAC is a proof of the node's token and can stand for nothing else."""
MEMBER_LABEL = b"cantor member proof v1\x00"
CHALLENGE_BYTES = 32
CHALLENGE = re.compile(f"[0-9a-f]{{{2 * CHALLENGE_BYTES}}}")
QUERY = "challenge"


def new_challenge() -> str:
    """32 fresh random bytes, in hex (``os.urandom`` is what ``secrets.token_bytes`` uses)."""
    return os.urandom(CHALLENGE_BYTES).hex()


def answer(token: str, challenge: str, port: int) -> str:
    """The node's answer: HMAC-SHA256 under ``token`` of LABEL, ``port``, ``challenge``."""
    import hashlib
    import hmac

    if not CHALLENGE.fullmatch(challenge):
        raise ValueError(f"a challenge is {2 * CHALLENGE_BYTES} hex digits")
    message = LABEL + int(port).to_bytes(2, "big") + bytes.fromhex(challenge)
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify(token: str, challenge: str, port: int, given: object) -> bool:
    """Whether ``given`` is the right answer to ``challenge`` on ``port`` (constant time)."""
    import hmac

    if not isinstance(given, str) or not token:
        return False
    expected = answer(token, challenge, port)
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))


def member_answer(token: str, challenge: str, member: str, address: str) -> str:
    """A pool member's answer: HMAC-SHA256 under ``token`` of MEMBER_LABEL, its id in the
    pool, the address it advertises there (as it wrote it) and ``challenge``."""
    import hashlib
    import hmac

    if not CHALLENGE.fullmatch(challenge):
        raise ValueError(f"a challenge is {2 * CHALLENGE_BYTES} hex digits")
    message = MEMBER_LABEL
    for part in (member.encode("utf-8"), address.encode("utf-8")):
        if len(part) > 0xFFFF:
            raise ValueError("a member's id and address are shorter than 64 KiB")
        message += len(part).to_bytes(2, "big") + part
    message += bytes.fromhex(challenge)
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify_member(token: str, challenge: str, member: str, address: str, given: object) -> bool:
    """Whether ``given`` proves that the node at ``address`` is the member ``member`` and
    holds ``token`` (constant time)."""
    import hmac

    if not isinstance(given, str) or not token:
        return False
    try:
        expected = member_answer(token, challenge, member, address)
    except ValueError:
        return False
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))
