"""The Hardware & Backends page's "Pool" section: every member of the node's pool — alive
or gone, its backend, its models, its queue — and, while the pool's Redis does not
answer, a banner that names what is wrong. Hidden when the node is in no pool."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..client.pool_view import PoolMember, PoolView
from . import theme

COLUMNS = ("Node", "State", "Backend", "Models", "Queue")
ROW_HEIGHT = 26


def member_state(member: PoolMember, view: PoolView) -> tuple[str, str | None]:
    """(words, tone) of a member's state: while the pool is away no one can tell."""
    if not view.reachable:
        return "unknown", "muted"
    if member.alive and member.proven is False:
        return "not verified", "danger"
    return ("alive", "success") if member.alive else ("gone", "danger")


class PoolPanel(QGroupBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Pool", parent)
        col = QVBoxLayout(self)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setMargin(8)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        theme.paint_panel(self.problem, "alarm")
        self.problem.hide()
        col.addWidget(self.problem)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        theme.tone(self.summary, "muted")
        col.addWidget(self.summary)
        self.untrusted = QLabel()
        self.untrusted.setWordWrap(True)
        self.untrusted.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        theme.tone(self.untrusted, "warning")
        self.untrusted.hide()
        col.addWidget(self.untrusted)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setAccessibleName(self.tr("Pool members"))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        h = self.table.horizontalHeader()
        h.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        for c, w in ((0, 170), (1, 80), (2, 120), (4, 200)):
            h.setSectionResizeMode(c, QHeaderView.ResizeMode.Interactive)
            h.resizeSection(c, w)
        col.addWidget(self.table)
        self.view: PoolView | None = None
        theme.notifier().changed.connect(self._scheme_changed)
        self.set_pool(None)

    def set_pool(self, view: PoolView | None) -> None:
        self.view = view
        self.setVisible(view is not None)
        if view is None:
            return
        problem = view.problem()
        self.problem.setText(problem or "")
        self.problem.setVisible(problem is not None)
        self.summary.setText(f"{view.url} · {view.summary()}" if view.url else view.summary())
        untrusted = view.untrusted()
        self.untrusted.setText(untrusted or "")
        self.untrusted.setVisible(untrusted is not None)
        self.table.setRowCount(len(view.members))
        for row, m in enumerate(view.members):
            name = m.name + (" (this node)" if m.name == view.me else "")
            state, tone = member_state(m, view)
            cells = (name, state, m.backend, ", ".join(m.models) or "none", m.queue_words)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 1:
                    theme.item_tone(item, tone)
                if c == 0 and m.url:
                    item.setToolTip(f"{m.name} [{m.id}] at {m.url}")
                elif c == 1 and m.proof_problem:
                    item.setToolTip(m.proof_problem)
                elif c == 3:
                    item.setToolTip("\n".join(m.models))
                self.table.setItem(row, c, item)
            self.table.setRowHeight(row, ROW_HEIGHT)
        shown = min(max(len(view.members), 1), 6)  # a studio's few machines, no scrolling
        self.table.setFixedHeight(
            self.table.horizontalHeader().sizeHint().height() + shown * ROW_HEIGHT + 4
        )

    def _scheme_changed(self, _scheme: str) -> None:
        theme.retone_items(self.table)

    def names(self) -> list[str]:
        """The members as listed (their names)."""
        return [m.name for m in self.view.members] if self.view is not None else []

    def cell(self, row: int, column: str) -> str:
        item = self.table.item(row, COLUMNS.index(column))
        return item.text() if item is not None else ""
