"""The one way the app tells assistive technology about news nobody is looking at (a song
done, something that failed): an announcement, which a screen reader speaks at once
(Qt sends it to AT-SPI, UI Automation and VoiceOver). Urgent news interrupts; other news
waits for the reader to finish what it is saying."""

from __future__ import annotations

from PySide6.QtGui import QAccessible, QAccessibleAnnouncementEvent
from PySide6.QtWidgets import QWidget


def announce(source: QWidget, text: str, *, urgent: bool = False) -> None:
    """Speak ``text`` for ``source`` (whose window the reader names with it)."""
    if not text or not QAccessible.isActive():
        return
    event = QAccessibleAnnouncementEvent(source, text)
    event.setPoliteness(
        QAccessible.AnnouncementPoliteness.Assertive
        if urgent
        else QAccessible.AnnouncementPoliteness.Polite
    )
    QAccessible.updateAccessibility(event)
