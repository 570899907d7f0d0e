"""The window's pages: each a thin widget over NodeLink and a Qt-free view-model."""

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget


def page_header(title: str, side: QWidget) -> QHBoxLayout:
    """A page's title on the left and a status widget (counts, disk use) on the right."""
    head = QHBoxLayout()
    head.addWidget(QLabel(f"<h2>{title}</h2>"))
    head.addStretch(1)
    head.addWidget(side)
    return head
