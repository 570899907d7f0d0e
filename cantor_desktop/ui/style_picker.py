"""Compose's Style row: the node's styles to apply (the form filled, still editable) and a
menu to save the form as a style, rename, remove, export and import one
(:mod:`cantor_desktop.views.styles` for the words)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QMenu,
    QMessageBox,
    QToolButton,
    QWidget,
)

from ..views import styles as words
from ..views.compose_form import ComposeForm
from ..views.messages import Message
from .widgets import ComboBox

if TYPE_CHECKING:
    from .services.styles import StylesService

FILE_FILTER = "Cantor styles (*.cantor-style)"


class StylePicker(QWidget):
    applied = Signal(dict)  # the style chosen, as the node lists it
    said = Signal(object)  # a Message for the page's message line

    def __init__(
        self,
        styles: StylesService,
        form: Callable[[], ComposeForm],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.styles = styles
        self.form = form
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.choice = ComboBox()
        self.choice.setAccessibleName(self.tr("Style"))
        self.choice.setToolTip(self.tr("Fill the form from a saved style (still editable)"))
        self.choice.activated.connect(self._chosen)
        self.menu_button = QToolButton()
        self.menu_button.setText(self.tr("Styles"))
        self.menu_button.setAccessibleName(self.tr("Style actions"))
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.menu_button)
        self.save_action = menu.addAction(self.tr("Save the form as a style…"), self.save)
        self.rename_action = menu.addAction(self.tr("Rename this style…"), self.rename)
        self.remove_action = menu.addAction(self.tr("Remove this style"), self.remove)
        menu.addSeparator()
        self.export_action = menu.addAction(self.tr("Export this style…"), self.export)
        menu.addAction(self.tr("Import a style…"), self.import_file)
        self.menu_button.setMenu(menu)
        row.addWidget(self.choice, 1)
        row.addWidget(self.menu_button)
        styles.changed.connect(self.set_styles)
        self.set_styles(styles.styles)

    def current(self) -> str:
        return str(self.choice.currentData() or "")

    def set_styles(self, styles: list) -> None:
        keep = self.current()
        self.choice.blockSignals(True)
        self.choice.clear()
        for text, name in words.entries(styles):
            self.choice.addItem(text, name)
        self.choice.setCurrentIndex(max(0, self.choice.findData(keep)))
        self.choice.blockSignals(False)
        self._restate()

    def _restate(self) -> None:
        chosen = bool(self.current())
        for action in (self.rename_action, self.remove_action, self.export_action):
            action.setEnabled(chosen)

    def _chosen(self, _index: int) -> None:
        self._restate()
        style = self.styles.get(self.current())
        if style is not None:
            self.applied.emit(style)

    def _failed(self, what: str) -> Callable[[str], None]:
        return lambda why: self.said.emit(Message.failed(what, why))

    # -- the menu ---------------------------------------------------------------------------
    def save(self) -> None:
        try:
            recipe = self.form().recipe()
        except ValueError as exc:  # RequestError: the form is not a song yet
            self.said.emit(Message.failed("save the style", str(exc)))
            return
        name, ok = QInputDialog.getText(
            self, self.tr("Save as a style"), self.tr("Style name:"), text=self.current()
        )
        if not ok or not name.strip():
            return
        if self.styles.get(name.strip()) is not None and not self._confirm_replace(name):
            return
        body: dict[str, Any] = {**recipe, "replace": True}
        self.styles.save(
            name.strip(),
            body,
            on_done=lambda style: self._saved(style),
            on_error=self._failed("save the style"),
        )

    def _saved(self, style: dict) -> None:
        self.said.emit(words.saved(style))
        self.choice.setCurrentIndex(max(0, self.choice.findData(style.get("name"))))
        self._restate()

    def _confirm_replace(self, name: str) -> bool:
        answer = QMessageBox.question(
            self,
            self.tr("Replace the style?"),
            self.tr("A style named %1 exists. Replace it with the form?").replace("%1", name),
        )
        return answer == QMessageBox.StandardButton.Yes

    def rename(self) -> None:
        old = self.current()
        if not old:
            return
        new, ok = QInputDialog.getText(
            self, self.tr("Rename the style"), self.tr("New name:"), text=old
        )
        if ok and new.strip() and new.strip() != old:
            self.styles.rename(old, new.strip(), on_error=self._failed("rename the style"))

    def remove(self) -> None:
        name = self.current()
        if not name:
            return
        answer = QMessageBox.question(
            self,
            self.tr("Remove the style?"),
            self.tr(
                "Remove the style %1 and its reference sound? Songs made with it stay."
            ).replace("%1", name),
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.styles.remove(name, on_error=self._failed("remove the style"))

    def export(self) -> None:
        name = self.current()
        if not name:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, self.tr("Export the style"), f"{name}.cantor-style", self.tr(FILE_FILTER)
        )
        if path:
            self.styles.export(
                name,
                path,
                on_done=lambda p: self.said.emit(Message(f"Exported style {name} to {p}")),
                on_error=self._failed("export the style"),
            )

    def import_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, self.tr("Import a style"), "", self.tr(FILE_FILTER)
        )
        if path:
            self.styles.import_file(
                path,
                on_done=lambda style: self.said.emit(
                    Message(f"Imported style {style.get('name', '')}")
                ),
                on_error=self._failed("import the style"),
            )
