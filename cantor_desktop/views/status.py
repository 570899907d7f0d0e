"""The status line under the window and in the tray: the node's state, its backend, the model
it has loaded, the song it is making and the pool's trouble, in one line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..client.link_state import LinkState
from ..client.pool_view import PoolView
from ..song.record import Song, SongState


def status_line(
    state: LinkState,
    detail: str,
    system: Mapping[str, Any],
    songs: Iterable[Song],
    pool: PoolView | None,
) -> str:
    """One line: "Node ready — backend cpu, loaded …", "Node error: why", …"""
    if state == LinkState.STOPPED:
        return "Node stopped"
    if state == LinkState.STARTING:
        return "Node starting…"
    if state == LinkState.ERROR:
        return f"Node error: {detail}" if detail else "Node error"
    bits = []
    fam = (system.get("families") or {}).get("acestep") or {}
    backend = fam.get("pinned") or fam.get("default")
    row = next(
        (b for b in fam.get("backends") or [] if isinstance(b, dict) and b.get("name") == backend),
        None,
    )
    if backend and row is not None and not row.get("installed"):
        # the auto choice is only a candidate until an engine build is installed
        bits.append(f"no ACE-Step engine yet ({backend} can be installed)")
    elif backend:
        bits.append(f"backend {backend}" + (" (pinned)" if fam.get("pinned") else ""))
    loaded = system.get("loaded")
    if isinstance(loaded, list):
        loaded = ", ".join(str(x.get("model", x) if isinstance(x, dict) else x) for x in loaded)
    if loaded:
        bits.append(f"loaded {loaded}")
    running = next((s for s in songs if s.state == SongState.RUNNING), None)
    if running is not None:
        bits.append(f"“{running.name[:30]}” {int(running.progress * 100)}%")
    head = "Generating" if state == LinkState.GENERATING else "Node ready"
    trouble = pool.short_problem() if pool is not None else None
    if trouble:  # first: it is what the user must know
        bits.insert(0, f"{trouble} ({pool.url})" if pool is not None and pool.url else trouble)
    return head + (" — " + ", ".join(bits) if bits else "")
