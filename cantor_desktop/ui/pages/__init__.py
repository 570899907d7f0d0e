"""The window's pages: each a thin widget over the link's services
(:mod:`cantor_desktop.ui.node_link`) and a Qt-free view-model (:mod:`cantor_desktop.views`)."""

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget


def page_header(title: str, side: QWidget) -> QHBoxLayout:
    """A page's title on the left and a status widget (counts, disk use) on the right."""
    head = QHBoxLayout()
    head.addWidget(QLabel(f"<h2>{title}</h2>"))
    head.addStretch(1)
    head.addWidget(side)
    return head
