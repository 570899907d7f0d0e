"""Compose: the song form (checked as you type with the node's rules) and the live queue.

Every field the node would refuse is named at once (with the field's own label) and
outlined; Ctrl+Return (⌘↩ on a Mac) generates. What is typed is kept as a draft across
restarts. The queue shows the songs in flight; one that finished offers Play (in Songs), one
that failed or was cancelled offers Retry. What the page may do and says is its view-model's
(:class:`~cantor_desktop.views.compose.ComposeViewModel`); this is its widgets.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QTimer, Qt, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ... import config
from ...client.pool_view import PoolView
from ...files import write_atomic
from ...song import musical_keys
from ...song import request as song_request
from ...song.record import Song
from ...system.paths import paths
from ...views.compose import LM_MODES, ComposeViewModel, strength_words
from ...views import styles as styles_words
from ...views.compose_form import KEYS, LYRICS_HINT, SKETCH_MODEL, ComposeForm
from ...views.messages import Message
from .. import app_state, shortcuts, theme
from ..choice_list import Choice, ChoiceList
from ..message_line import MessageLine
from ..song_queue import SongQueue
from ..style_picker import StylePicker
from ..widgets import ComboBox, ElidedLabel, SpinBox, heading

if TYPE_CHECKING:
    from ..compose_advanced import AdvancedFields
    from ..node_link import NodeLink

log = logging.getLogger(__name__)

POOL_EVERY_S = 10.0  # who is in the pool and has what, for the Node choice
DRAFT_SAVE_MS = 600


def draft_file() -> Path:
    return paths().compose_draft_file


def _holds_input(field: QWidget) -> bool:
    """Whether a field holds something (an empty one is outlined only once Generate was
    asked for)."""
    if isinstance(field, QPlainTextEdit):
        return bool(field.toPlainText())
    if isinstance(field, QLineEdit):
        return bool(field.text())
    return True


class ComposePage(QWidget):
    generated = Signal(str)  # song id
    play_song = Signal(str)  # song id: open it in Songs and play it

    def __init__(self, link: NodeLink, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.view_model = ComposeViewModel()
        self._advanced: AdvancedFields | None = None  # built when first needed
        self._draft_timer: QTimer | None = None  # none until the form is filled
        outer = QVBoxLayout(self)
        outer.addWidget(
            heading(QCoreApplication.translate("MainWindow", "Compose"), 1.5)
        )  # as <h2> shows it
        body = QHBoxLayout()
        outer.addLayout(body, 3)
        body.addLayout(self._words(), 3)
        body.addWidget(self._song_box(), 2)
        outer.addWidget(self._starting_box())
        outer.addLayout(self._action_row())
        outer.addWidget(heading(self.tr("Queue")))
        self.queue = SongQueue()
        self.queue.action.connect(self._row_action)
        outer.addWidget(self.queue, 2)
        self.fields: dict[str, QWidget] = {
            "caption": self.caption,
            "lyrics": self.lyrics,
            "duration": self.duration,
            "bpm": self.bpm,
            "key": self.key,
            "time_signature": self.time_signature,
            "language": self.language,
            "seed": self.seed,
            "model": self.model,
            "format": self.format,
            "batch": self.takes,
            "node": self.node,
        }
        self.set_models([])
        self.format.setCurrentText(self._default_format())
        self._generate_action()
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_SAVE_MS)
        self._draft_timer.timeout.connect(self.save_draft)
        self._connect_fields()
        link.settings.loaded.connect(self._node_settings)
        link.songs.updated.connect(self.show_song)
        link.models.loaded.connect(self.set_models)
        link.pool.changed.connect(self.set_pool)
        link.adapters.changed.connect(self.set_adapters)
        self.set_pool(link.pool.view)
        self.load_draft()
        self.check()
        theme.notifier().changed.connect(self._scheme_changed)  # outlines re-coloured

    # -- building -------------------------------------------------------------------------
    def _words(self) -> QLayout:
        """The caption and the lyrics, with the language model's helpers."""
        left = QVBoxLayout()
        self.caption = QPlainTextEdit()
        self.caption.setPlaceholderText(
            "Describe the song: style, instruments, mood — e.g. "
            "“warm lo-fi piano, rain, slow groove”"
        )
        self.caption.setFixedHeight(64)
        self.caption.setTabChangesFocus(True)  # Tab moves on, as in every other field
        caption_label = QLabel(self.tr("&Caption"))
        caption_label.setBuddy(self.caption)
        left.addWidget(caption_label)
        left.addWidget(self.caption)
        lyr_head = QHBoxLayout()
        lyrics_label = QLabel(self.tr("&Lyrics"))
        lyr_head.addWidget(lyrics_label)
        lyr_head.addStretch(1)
        self.instrumental = QCheckBox(self.tr("Instrumental"))
        self.instrumental.setToolTip("Sends [Instrumental]; your lyrics are kept for later")
        self.inspire = QPushButton(self.tr("Inspire me"))
        self.inspire.setToolTip(
            "Write a caption and lyrics from the short idea in Caption "
            "(the language model; you edit the result)"
        )
        self.tidy = QPushButton(self.tr("Tidy my lyrics"))
        self.tidy.setToolTip(
            "The language model puts your caption and lyrics in the shape "
            "ACE-Step sings best (you edit the result)"
        )
        lyr_head.addWidget(self.inspire)
        lyr_head.addWidget(self.tidy)
        lyr_head.addWidget(self.instrumental)
        left.addLayout(lyr_head)
        self.lyrics = QPlainTextEdit()
        self.lyrics.setPlaceholderText(LYRICS_HINT)
        self.lyrics.setTabChangesFocus(True)
        lyrics_label.setBuddy(self.lyrics)
        left.addWidget(self.lyrics, 1)
        return left

    def _song_box(self) -> QGroupBox:
        """The song's fields, and the Advanced section folded under them."""
        box = QGroupBox(self.tr("Song"))
        grid = self._song_grid = QFormLayout(box)
        self.duration = QLineEdit()
        self.duration.setPlaceholderText(self.tr("auto (10–600 s)"))
        self.bpm = QLineEdit()
        self.bpm.setPlaceholderText(self.tr("auto (30–300)"))
        self.key = ComboBox()
        self.key.setEditable(True)
        key_text = self.key.lineEdit()
        if key_text is not None:  # an editable combo's own field, where the typing goes
            key_text.setAccessibleName(self.tr("Key"))
        self.key.addItem("auto")
        self.key.addItems(list(KEYS))
        self.time_signature = ComboBox()
        self.time_signature.addItem("auto", "")
        for ts in song_request.TIME_SIGNATURES:
            self.time_signature.addItem(f"{ts}/4", str(ts))
        self.language = ComboBox()
        self.language.addItem("auto", "")
        for code in song_request.LANGUAGES:
            if code != "unknown":
                self.language.addItem(code, code)
        seed_row = QHBoxLayout()
        self.seed = QLineEdit()
        self.seed.setPlaceholderText(self.tr("random"))
        self.seed.setAccessibleName(self.tr("Seed"))  # its row's label names a layout
        self.seed_lock = QCheckBox(self.tr("Lock"))
        self.seed_lock.setToolTip(
            "Lock: reuse this seed for every take; unlocked: a new random seed"
        )
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.seed_lock)
        self.model = ComboBox()
        self.format = ComboBox()
        self.format.addItems(list(song_request.SONG_FORMATS))
        self.takes = SpinBox()
        self.takes.setRange(*song_request.BATCH_RANGE)
        self.node = ComboBox()  # in a pool: any member, or one by name
        self._node_choices = ChoiceList(self.node)
        self.node.setModel(self._node_choices)
        self.node.setToolTip(
            "Which machine of the pool makes the song: any member that has the model, "
            "or the one you choose"
        )
        self.style_picker = StylePicker(self.link.styles, self.form)
        self.style_picker.applied.connect(self.apply_style)
        self.style_picker.said.connect(self.problem_said)
        grid.addRow(self.tr("Style"), self.style_picker)
        grid.addRow(self.tr("Duration (s)"), self.duration)
        grid.addRow(self.tr("BPM"), self.bpm)
        grid.addRow(self.tr("Key"), self.key)
        grid.addRow(self.tr("Time signature"), self.time_signature)
        grid.addRow(self.tr("Language"), self.language)
        grid.addRow(self.tr("Seed"), seed_row)
        grid.addRow(self.tr("Model"), self.model)
        grid.addRow(self.tr("Node"), self.node)
        grid.addRow(self.tr("Format"), self.format)
        grid.addRow(self.tr("Takes"), self.takes)
        # Advanced, folded away (and remembered so); built when first needed
        self.advanced_toggle = QPushButton("Advanced ▸")
        self.advanced_toggle.setCheckable(True)
        self.advanced_toggle.setFlat(True)
        self._advanced_row = grid.rowCount()
        toggle_row = QHBoxLayout()  # the toggle at the left, as wide as its text
        toggle_row.addWidget(self.advanced_toggle)
        toggle_row.addStretch(1)
        grid.addRow(toggle_row)
        if app_state.load().get("compose_advanced_open"):
            self.advanced_toggle.setChecked(True)
            self.advanced_fields()
        self.advanced_toggle.toggled.connect(self._show_advanced)
        return box

    def _starting_box(self) -> QGroupBox:
        """What the song starts from: a cover of a song, a reference sound."""
        self.starting = QGroupBox(self.tr("Starting from"))
        grid = QGridLayout(self.starting)
        self.cover_label = ElidedLabel()  # a song's title, however long: never wider
        self.strength = QSlider(Qt.Orientation.Horizontal)
        self.strength.setRange(0, 100)
        self.strength.setValue(100)
        self.strength_words = QLabel()
        self.strength_words.setWordWrap(True)
        theme.tone(self.strength_words, "muted")
        self.faithful = QCheckBox(self.tr("Faithful"))
        self.faithful.setToolTip(
            "Hear the source exactly, not through the model's codes: "
            "closer to the original, less room for the new caption"
        )
        self.cover_clear = QPushButton("×")
        self.cover_clear.setFixedWidth(28)
        self.cover_clear.setToolTip("Make a new song instead of a cover")
        self.cover_clear.setAccessibleName("Remove the cover's source")  # a screen reader
        # would read the bare symbol otherwise
        self.reference_label = ElidedLabel()
        self.reference_clear = QPushButton("×")
        self.reference_clear.setFixedWidth(28)
        self.reference_clear.setToolTip("No reference sound")
        self.reference_clear.setAccessibleName("Remove the reference sound")
        grid.addWidget(self.cover_label, 0, 0)
        grid.addWidget(self.strength, 0, 1)
        grid.addWidget(self.faithful, 0, 2)
        grid.addWidget(self.cover_clear, 0, 3)
        grid.addWidget(self.strength_words, 1, 0, 1, 4)
        grid.addWidget(self.reference_label, 2, 0, 1, 3)
        grid.addWidget(self.reference_clear, 2, 3)
        self.strength.valueChanged.connect(self._strength_changed)
        self.faithful.toggled.connect(self.check)
        self.cover_clear.clicked.connect(lambda: self.set_cover(None))
        self.reference_clear.clicked.connect(lambda: self.set_reference(None))
        self._show_starting()
        return self.starting

    def _action_row(self) -> QLayout:
        """The message line (what the node would refuse, what happened), Cover this file
        and Generate."""
        action = QHBoxLayout()
        self.problem = MessageLine()
        self.generate = QPushButton(self.tr("Generate"))
        self.generate.setMinimumHeight(36)
        theme.accent_button(self.generate)
        self.generate.setDefault(True)
        self.generate.setMinimumWidth(140)
        action.addWidget(self.problem, 1)
        self.cover_file = QPushButton(self.tr("Cover this file"))
        self.cover_file.hide()
        self.cover_file.clicked.connect(self._cover_dropped)
        action.addWidget(self.cover_file)
        action.addWidget(self.generate)
        return action

    def _generate_action(self) -> None:
        """Generate: the button, its keys on this page (⌘↩ / Ctrl+Return), the Song menu."""
        self.generate_action = QAction(self.tr("Generate"), self)
        self.generate_action.setMenuRole(QAction.MenuRole.NoRole)
        self.generate_action.setShortcuts(shortcuts.keys("generate"))
        self.generate_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.generate_action.setToolTip(
            shortcuts.tip("Generate a song from the form", self.generate_action.shortcuts())
        )
        self.generate_action.triggered.connect(self.on_generate)
        self.addAction(self.generate_action)
        self.generate.setToolTip(self._generate_tip())

    def _connect_fields(self) -> None:
        for text in (self.caption, self.lyrics):
            text.textChanged.connect(self.check)
        for line in (self.duration, self.bpm, self.seed):
            line.textChanged.connect(self.check)
        self.key.currentTextChanged.connect(self.check)
        for combo in (self.time_signature, self.language, self.model, self.format):
            combo.currentIndexChanged.connect(self.check)
        self.takes.valueChanged.connect(self.check)
        self.format.activated.connect(self._format_chosen)
        self.instrumental.toggled.connect(self._instrumental_toggled)
        self.seed_lock.toggled.connect(self._seed_lock_toggled)
        self.inspire.clicked.connect(lambda: self.ask_lm("inspire"))
        self.tidy.clicked.connect(lambda: self.ask_lm("format"))
        self.generate.clicked.connect(self.on_generate)
        self.model.currentIndexChanged.connect(self._fill_nodes)
        self.node.currentIndexChanged.connect(self.check)
        self.setAcceptDrops(True)

    # -- the form -------------------------------------------------------------------------
    def form(self) -> ComposeForm:
        vm = self.view_model
        key = self.key.currentText().strip()
        return ComposeForm(
            caption=self.caption.toPlainText(),
            lyrics=self.lyrics.toPlainText(),
            instrumental=self.instrumental.isChecked(),
            duration=self.duration.text(),
            bpm=self.bpm.text(),
            key="" if key.lower() == "auto" else key,
            time_signature=self.time_signature.currentData() or "",
            language=self.language.currentData() or "",
            seed=self.seed.text(),
            seed_locked=self.seed_lock.isChecked(),
            model=self.model.currentData() or SKETCH_MODEL,
            format=self.format.currentText(),
            takes=self.takes.value(),
            cover_of=vm.cover[0] if vm.cover else None,
            cover_name=vm.cover[1] if vm.cover else "",
            strength=self.strength.value() / 100,
            faithful=self.faithful.isChecked(),
            reference=vm.reference[0] if vm.reference else None,
            reference_name=vm.reference[1] if vm.reference else "",
            **(self._advanced.values() if self._advanced is not None else {}),
        )

    def set_form(self, form: ComposeForm) -> None:
        vm = self.view_model
        self.caption.setPlainText(form.caption)
        self.lyrics.setPlainText(form.lyrics)
        self.instrumental.setChecked(form.instrumental)
        self.duration.setText(form.duration)
        self.bpm.setText(form.bpm)
        self.key.setCurrentText(musical_keys.display(form.key) if form.key else "auto")
        self.time_signature.setCurrentIndex(
            max(0, self.time_signature.findData(form.time_signature))
        )
        self.language.setCurrentIndex(max(0, self.language.findData(form.language)))
        self.seed.setText(form.seed)
        self.seed_lock.setChecked(form.seed_locked)
        idx = self.model.findData(form.model)
        if idx < 0:
            self.model.addItem(f"{form.model} (not installed)", form.model)
            idx = self.model.count() - 1
        self.model.setCurrentIndex(idx)
        self.format.setCurrentText(form.format)
        self.takes.setValue(form.takes)
        if self._advanced is not None or form.advanced_set:
            self.advanced_fields().set_values(form)
        vm.cover = (form.cover_of, form.cover_name) if form.cover_of else None
        vm.reference = (form.reference, form.reference_name) if form.reference else None
        self.strength.setValue(int(round(form.strength * 100)))
        self.faithful.setChecked(form.faithful)
        self._show_starting()
        self.check()

    def check(self) -> bool:
        """Name every field the node would refuse (all at once), outline them, and allow
        Generate only when there is none."""
        vm = self.view_model
        form = self.form()
        verdict = vm.check(form, self.chosen_node())
        self.seed.setEnabled(self.seed_lock.isChecked())
        advanced = self._advanced.fields if self._advanced is not None else {}
        for name, widget in {**self.fields, **advanced}.items():
            outlined = vm.outlined(verdict, name, _holds_input(widget))
            widget.setStyleSheet(theme.invalid_outline() if outlined else "")
        self.advanced_toggle.setText(vm.advanced_title(form, self.advanced_toggle.isChecked()))
        if self._draft_timer is not None:
            self._draft_timer.start()
        self.generate.setEnabled(verdict.ok)
        self.generate.setToolTip(self._generate_tip() if verdict.ok else verdict.text)
        said = vm.said(verdict)  # (after the outlines: they note which fields were touched)
        self.problem.say(said, "danger" if said else None)
        return verdict.ok

    def apply_style(self, style: dict) -> None:
        """The form filled from a style (the lyrics, length and takes stay the musician's)."""
        self.set_form(self.form().with_style(style))
        self.problem_said(styles_words.applied(style))

    def problem_said(self, message: Message) -> None:
        self.problem.show_message(message)

    def _scheme_changed(self, _scheme: str) -> None:
        """(A method, not a lambda: the connection ends with the page.)"""
        self.check()

    def _generate_tip(self) -> str:
        return shortcuts.tip("Generate", self.generate_action.shortcuts())

    def _instrumental_toggled(self, on: bool) -> None:
        self.lyrics.setEnabled(not on)  # kept, greyed
        self.check()

    def _seed_lock_toggled(self, on: bool) -> None:
        if on and not self.seed.text().strip():
            self.seed.setText(str(self.form().lock_seed()))
        self.check()

    # -- the Advanced section ---------------------------------------------------------------
    def advanced_fields(self) -> AdvancedFields:
        """The Advanced section, built now if this is its first use."""
        if self._advanced is None:
            from ..compose_advanced import AdvancedFields

            self._advanced = AdvancedFields(self)
            self._song_grid.insertRow(self._advanced_row + 1, self._advanced)  # then shown
            self._advanced.setVisible(self.advanced_toggle.isChecked())
            if self.view_model.adapters_known:
                self._advanced.set_adapters(self.view_model.adapters)
            self._advanced.changed.connect(self.check)
        return self._advanced

    @property
    def adv_fields(self) -> dict[str, QWidget]:
        """The Advanced section's fields by name (building the section)."""
        return self.advanced_fields().fields

    def _show_advanced(self, shown: bool) -> None:
        """Open or close the Advanced section (and remember which)."""
        self.advanced_fields().setVisible(shown)
        self.advanced_toggle.setText(self.view_model.advanced_title(self.form(), shown))
        try:
            app_state.remember("compose_advanced_open", shown)
        except OSError:
            pass

    def set_adapters(self, adapters: list) -> None:
        """The node's adapters, for the Advanced section's list (kept until it is built)."""
        self.view_model.adapters = list(adapters)
        self.view_model.adapters_known = True
        if self._advanced is not None:
            self._advanced.set_adapters(self.view_model.adapters)
        self.check()

    # -- where the song starts from ---------------------------------------------------------
    def set_cover(self, source: dict | None, name: str = "") -> None:
        """Make the next song a cover of ``source`` (a take of a song, or an upload)."""
        self.view_model.cover = (source, name) if source else None
        self._show_starting()
        self.check()

    def set_reference(self, source: dict | None, name: str = "") -> None:
        """Borrow the sound (timbre) of ``source`` for the next song."""
        self.view_model.reference = (source, name) if source else None
        self._show_starting()
        self.check()

    def _cover_dropped(self) -> None:
        if self.view_model.dropped is not None:
            self.set_cover(*self.view_model.dropped)

    def _strength_changed(self, value: int) -> None:
        self.strength_words.setText(strength_words(value / 100))
        self.check()

    def _show_starting(self) -> None:
        vm = self.view_model
        self.starting.setVisible(bool(vm.cover or vm.reference))
        for w in (
            self.cover_label,
            self.strength,
            self.faithful,
            self.cover_clear,
            self.strength_words,
        ):
            w.setVisible(vm.cover is not None)
        for w in (self.reference_label, self.reference_clear):
            w.setVisible(vm.reference is not None)
        if vm.cover:
            self.cover_label.setText(vm.cover_text())
            self.strength_words.setText(strength_words(self.strength.value() / 100))
        if vm.reference:
            self.reference_label.setText(vm.reference_text())

    # -- the language model's helpers -------------------------------------------------------
    def ask_lm(self, mode: str) -> None:
        """Inspire me (``inspire``: a short idea → caption and lyrics) or Tidy my lyrics
        (``format``): the node's language model fills the form for the musician to edit."""
        form = self.form()
        problem = self.view_model.lm_problem(mode, form)
        if problem is not None:
            self.problem.say(problem)
            return
        button = self.inspire if mode == "inspire" else self.tidy
        button.setEnabled(False)
        self.problem.say(LM_MODES[mode])

        def done(answer: dict) -> None:
            button.setEnabled(True)
            self.problem.clear()
            self.set_form(self.view_model.with_lm_answer(self.form(), answer))

        def failed(text: str) -> None:
            button.setEnabled(True)
            self.problem.fail("get the language model's help", text)

        self.link.songs.ask_lm(
            mode, self.view_model.lm_request(form), on_done=done, on_error=failed
        )

    # -- a dropped audio file: understood, then the form filled from it ---------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 — Qt's name
        if self._dropped_audio(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 — Qt's name
        path = self._dropped_audio(event)
        if path is not None:
            event.acceptProposedAction()
            self.fill_from_file(path)

    def _dropped_audio(self, event: QDragEnterEvent | QDropEvent) -> str | None:
        mime = event.mimeData()
        urls = mime.urls() if mime.hasUrls() else []
        return self.view_model.dropped_audio([u.toLocalFile() for u in urls if u.isLocalFile()])

    def fill_from_file(self, path: str) -> None:
        """Send the file to the node, let its model read it (caption, lyrics, tempo, key,
        time signature, length, language) and fill the form for the musician to edit."""
        name = os.path.basename(path)
        self.problem.say(f"Listening to {name}…")

        def done(result: tuple[dict, dict]) -> None:
            upload, heard = result
            self.set_form(self.view_model.with_file_heard(self.form(), upload, heard, name))
            self.problem.say(self.view_model.heard_words(name))
            self.cover_file.setVisible(True)

        self.link.songs.understand(
            path, on_done=done, on_error=lambda text: self.problem.fail(f"read {name}", text)
        )

    # -- the node's default format, live ----------------------------------------------------
    def _default_format(self) -> str:
        ours = config.current()[0].get("songs.format")
        return self.view_model.default_format(self.link.settings.node_config, ours)

    def _node_settings(self, values: dict) -> None:
        fmt = self.view_model.format_from_node(values)
        if fmt is not None:
            self.format.setCurrentText(fmt)

    def _format_chosen(self, _index: int) -> None:
        self.view_model.format_chosen = True

    # -- the draft --------------------------------------------------------------------------
    def save_draft(self) -> None:
        """Keep what is typed (written off the GUI thread: an fsync can take a while)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a bare widget in a test): nothing to keep
            return
        data = self.view_model.draft_bytes(self.form())
        self.link.tasks.start(
            "draft",
            asyncio.to_thread(write_atomic, draft_file(), data),
            on_error=lambda text: log.warning("the compose draft could not be kept: %s", text),
        )

    def load_draft(self) -> None:
        form = self.view_model.read_draft(draft_file(), self._default_format())
        if form is not None:
            self.set_form(form)

    # -- the models and the pool: which member makes the song ------------------------------
    def set_models(self, models: list) -> None:
        """The node's ready models, and in a pool the models only other members have
        (named with who has them)."""
        self.view_model.models = list(models)
        current = self.model.currentData()
        self.model.blockSignals(True)
        self.model.clear()
        for label, name in self.view_model.model_choices():
            self.model.addItem(label, name)
        self.model.setCurrentIndex(max(0, self.model.findData(current)))
        self.model.blockSignals(False)

    def set_pool(self, view: PoolView | None) -> None:
        """The node's pool (None: in none, and the Node choice is hidden)."""
        models_changed = self.view_model.set_pool(view)
        self._song_grid.setRowVisible(self.node, view is not None)
        if models_changed:
            self.set_models(self.view_model.models)
        self._fill_nodes()

    def _fill_nodes(self) -> None:
        current = self.node.currentData() or ""
        found = self.view_model.node_choices(self.model.currentData() or SKETCH_MODEL, current)
        if found is not None:
            choices = tuple(Choice(c.label, c.name, c.usable) for c in found)
            if choices != self._node_choices.rows():  # unchanged: an open list is left alone
                self.node.blockSignals(True)
                self._node_choices.set_rows(list(choices))
                self.node.setCurrentIndex(max(0, self.node.findData(current)))
                self.node.blockSignals(False)
        self.check()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 — the pool while shown
        super().showEvent(event)
        self.link.pool.show("compose", POOL_EVERY_S)

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802
        super().hideEvent(event)
        self.link.pool.show("compose", None)

    def chosen_node(self) -> str | None:
        """The member the song goes to (None: any member, or no pool)."""
        return self.view_model.chosen_node(self.node.currentData() or "")

    # -- generate and the queue -------------------------------------------------------------
    def on_generate(self) -> None:
        self.view_model.tried = True
        if not self.check():
            return
        body = self.form().validated()
        self.generate.setEnabled(False)

        def failed(text: str) -> None:
            self.problem.fail("queue the song", text)
            self.generate.setEnabled(True)

        def done(song: Song) -> None:
            self.view_model.tried = False
            self.check()
            self.generated.emit(song.id)

        self.link.songs.queue("submit", body, self.chosen_node(), on_done=done, on_error=failed)

    def show_song(self, song: Song) -> None:
        self.queue.show_song(song)

    def _row_action(self, song_id: str) -> None:
        song = self.link.songs.get(song_id)
        if song is None:
            return
        action = self.view_model.row_action(song)
        if action == "play":
            self.play_song.emit(song_id)
        elif action == "retry":
            self.link.songs.retry(song_id)
        else:
            self.link.songs.cancel(song_id)

    def queue_progress(self, song_id: str) -> float:
        return self.queue.progress(song_id)
