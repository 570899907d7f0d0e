"""Compose: the song form (checked as you type with the node's rules) and the live queue.

Every field the node would refuse is named at once (with the field's own label) and
outlined; Ctrl+Return (⌘↩ on a Mac) generates. What is typed is kept as a draft across restarts. The queue
shows the songs in flight; one that finished offers Play (in Songs), one that failed or was
cancelled offers Retry.
"""

from __future__ import annotations

import asyncio
import json
import logging

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ... import config
from ...song import musical_keys, request as song_request
from ...system.paths import paths
from ...client.pool_view import PoolView
from ...models.catalogue import canonical_model
from ...song.record import Song, SongState
from .. import shortcuts, theme
from ..choice_list import Choice, ChoiceList
from ..compose_form import KEYS, LYRICS_HINT, SKETCH_MODEL, ComposeForm
from ..song_queue import SongQueue
from ..widgets import ComboBox, SpinBox, heading
from ...files import write_atomic

log = logging.getLogger(__name__)

SKETCH_LABEL = "Sketch — built-in, no AI model"
LABELS = {
    "caption": "Caption",
    "lyrics": "Lyrics",
    "duration": "Duration",
    "bpm": "BPM",
    "key": "Key",
    "time_signature": "Time signature",
    "language": "Language",
    "seed": "Seed",
    "model": "Model",
    "format": "Format",
    "batch": "Takes",
    "adapter": "Adapter",
    "adapter_scale": "Adapter scale",
    "node": "Node",
}
ANY_NODE = "Any node"
POOL_EVERY_S = 10.0  # who is in the pool and has what, for the Node choice
DRAFT_SAVE_MS = 600


def draft_file():
    return paths().compose_draft_file


def _holds_input(field: QWidget) -> bool:
    """Whether a field holds something: an empty required field is not outlined until
    Generate is asked for (Ctrl+Enter); the line under the form names it at once, and
    Generate's tooltip too."""
    if isinstance(field, QPlainTextEdit):
        return bool(field.toPlainText())
    if isinstance(field, QLineEdit):
        return bool(field.text())
    return True


def strength_words(strength: float) -> str:
    """What a cover's strength does, in a sentence (it is the share of the steps that hear
    the source)."""
    pct = int(round(strength * 100))
    if strength >= 0.85:
        how = "keeps the source's structure, melody and timing; the caption restyles its sound"
    elif strength >= 0.5:
        how = "follows the source's outline; the caption changes its sound and details"
    elif strength >= 0.2:
        how = "only the source's broad shape survives; mostly a new song in its tempo"
    else:
        how = "barely hears the source: close to a new song from the caption"
    return f"{pct} % of the steps hear the source: it {how}."


class ComposePage(QWidget):
    generated = Signal(str)  # song id
    play_song = Signal(str)  # song id: open it in Songs and play it

    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self._format_chosen = False
        outer = QVBoxLayout(self)
        title = heading("Compose", 1.5)  # as <h2> shows it
        outer.addWidget(title)

        body = QHBoxLayout()
        outer.addLayout(body, 3)
        left = QVBoxLayout()
        body.addLayout(left, 3)
        self.caption = QPlainTextEdit()
        self.caption.setPlaceholderText(
            "Describe the song: style, instruments, mood — e.g. "
            "“warm lo-fi piano, rain, slow groove”"
        )
        self.caption.setFixedHeight(64)
        left.addWidget(QLabel("Caption"))
        left.addWidget(self.caption)
        lyr_head = QHBoxLayout()
        lyr_head.addWidget(QLabel("Lyrics"))
        lyr_head.addStretch(1)
        self.instrumental = QCheckBox("Instrumental")
        self.instrumental.setToolTip("Sends [Instrumental]; your lyrics are kept for later")
        self.inspire = QPushButton("Inspire me")
        self.inspire.setToolTip(
            "Write a caption and lyrics from the short idea in Caption "
            "(the language model; you edit the result)"
        )
        self.tidy = QPushButton("Tidy my lyrics")
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
        left.addWidget(self.lyrics, 1)

        box = QGroupBox("Song")
        grid = QFormLayout(box)
        body.addWidget(box, 2)
        self.duration = QLineEdit()
        self.duration.setPlaceholderText("auto (10–600 s)")
        self.bpm = QLineEdit()
        self.bpm.setPlaceholderText("auto (30–300)")
        self.key = ComboBox()
        self.key.setEditable(True)
        self.key.addItem("auto")
        self.key.addItems(KEYS)
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
        self.seed.setPlaceholderText("random")
        self.seed_lock = QCheckBox("Lock")
        self.seed_lock.setToolTip(
            "Lock: reuse this seed for every take; unlocked: a new random seed"
        )
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.seed_lock)
        self.model = ComboBox()
        self.format = ComboBox()
        self.format.addItems(song_request.SONG_FORMATS)
        self.takes = SpinBox()
        self.takes.setRange(*song_request.BATCH_RANGE)
        self.node = ComboBox()  # in a pool: any member, or one by name
        self._node_choices = ChoiceList(self.node)
        self.node.setModel(self._node_choices)
        self.node.setToolTip(
            "Which machine of the pool makes the song: any member that has the model, "
            "or the one you choose"
        )
        self._pool: PoolView | None = None
        grid.addRow("Duration (s)", self.duration)
        grid.addRow("BPM", self.bpm)
        grid.addRow("Key", self.key)
        grid.addRow("Time signature", self.time_signature)
        grid.addRow("Language", self.language)
        grid.addRow("Seed", seed_row)
        grid.addRow("Model", self.model)
        grid.addRow("Node", self.node)
        grid.addRow("Format", self.format)
        grid.addRow("Takes", self.takes)

        # Advanced, folded away (and remembered so); built when first needed
        self.advanced_toggle = QPushButton("Advanced ▸")
        self.advanced_toggle.setCheckable(True)
        self.advanced_toggle.setFlat(True)
        self._advanced = None
        self._adapters: list | None = None
        self._song_grid = grid
        self._advanced_row = grid.rowCount()
        toggle_row = QHBoxLayout()  # the toggle at the left, as wide as its text
        toggle_row.addWidget(self.advanced_toggle)
        toggle_row.addStretch(1)
        grid.addRow(toggle_row)
        from .. import app_state

        if app_state.load().get("compose_advanced_open"):
            self.advanced_toggle.setChecked(True)
            self.advanced_fields()
        self.advanced_toggle.toggled.connect(self._fold)

        # what the song starts from: a cover of a song, a reference sound
        self._cover: tuple[dict, str] | None = None
        self._reference: tuple[dict, str] | None = None
        self.starting = QGroupBox("Starting from")
        grid_s = QGridLayout(self.starting)
        self.cover_label = QLabel()
        self.strength = QSlider(Qt.Horizontal)
        self.strength.setRange(0, 100)
        self.strength.setValue(100)
        self.strength_words = QLabel()
        self.strength_words.setWordWrap(True)
        theme.tone(self.strength_words, "muted")
        self.faithful = QCheckBox("Faithful")
        self.faithful.setToolTip(
            "Hear the source exactly, not through the model's codes: "
            "closer to the original, less room for the new caption"
        )
        self.cover_clear = QPushButton("×")
        self.cover_clear.setFixedWidth(28)
        self.cover_clear.setToolTip("Make a new song instead of a cover")
        self.reference_label = QLabel()
        self.reference_clear = QPushButton("×")
        self.reference_clear.setFixedWidth(28)
        self.reference_clear.setToolTip("No reference sound")
        grid_s.addWidget(self.cover_label, 0, 0)
        grid_s.addWidget(self.strength, 0, 1)
        grid_s.addWidget(self.faithful, 0, 2)
        grid_s.addWidget(self.cover_clear, 0, 3)
        grid_s.addWidget(self.strength_words, 1, 0, 1, 4)
        grid_s.addWidget(self.reference_label, 2, 0, 1, 3)
        grid_s.addWidget(self.reference_clear, 2, 3)
        self.strength.valueChanged.connect(self._strength_changed)
        self.faithful.toggled.connect(self.check)
        self.cover_clear.clicked.connect(lambda: self.set_cover(None))
        self.reference_clear.clicked.connect(lambda: self.set_reference(None))
        outer.addWidget(self.starting)
        self._show_starting()

        action = QHBoxLayout()
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        theme.tone(self.problem, "danger")
        self._tried = False  # Generate asked for: empty required fields are outlined too
        self.generate = QPushButton("Generate")
        self.generate.setMinimumHeight(36)
        theme.accent_button(self.generate)
        self.generate.setDefault(True)
        self.generate.setMinimumWidth(140)
        action.addWidget(self.problem, 1)
        self.cover_file = QPushButton("Cover this file")
        self.cover_file.hide()
        self._dropped: tuple[dict, str] | None = None
        self.cover_file.clicked.connect(lambda: self._dropped and self.set_cover(*self._dropped))
        action.addWidget(self.cover_file)
        action.addWidget(self.generate)
        outer.addLayout(action)

        outer.addWidget(heading("Queue"))
        self.queue = SongQueue()
        self.queue.action.connect(self._row_action)
        outer.addWidget(self.queue, 2)

        self.fields = {
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
        self._models: list = []
        self.set_models([])
        self.format.setCurrentText(self._node_format())
        self.format.activated.connect(lambda _i: setattr(self, "_format_chosen", True))
        link.settings.loaded.connect(self._node_settings)
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_SAVE_MS)
        self._draft_timer.timeout.connect(self.save_draft)
        # Generate: the button, its keys on this page (⌘↩ / Ctrl+Return), the Song menu
        self.generate_action = QAction("Generate", self)
        self.generate_action.setMenuRole(QAction.NoRole)
        self.generate_action.setShortcuts(shortcuts.keys("generate"))
        self.generate_action.setShortcutContext(Qt.WidgetWithChildrenShortcut)
        self.generate_action.setToolTip(
            shortcuts.tip("Generate a song from the form", self.generate_action.shortcuts())
        )
        self.generate_action.triggered.connect(self.on_generate)
        self.addAction(self.generate_action)
        self.generate.setToolTip(self._generate_tip())
        for w in (self.caption, self.lyrics):
            w.textChanged.connect(self.check)
        for w in (self.duration, self.bpm, self.seed):
            w.textChanged.connect(self.check)
        self.key.currentTextChanged.connect(self.check)
        for w in (self.time_signature, self.language, self.model, self.format):
            w.currentIndexChanged.connect(self.check)
        self.takes.valueChanged.connect(self.check)
        self.instrumental.toggled.connect(self._instrumental_toggled)
        self.setAcceptDrops(True)
        self.inspire.clicked.connect(lambda: self.ask_lm("inspire"))
        self.tidy.clicked.connect(lambda: self.ask_lm("format"))
        self.seed_lock.toggled.connect(self._seed_lock_toggled)
        self.generate.clicked.connect(self.on_generate)
        link.songs.updated.connect(self.show_song)
        link.models.loaded.connect(self.set_models)
        link.pool.changed.connect(self.set_pool)
        self.model.currentIndexChanged.connect(self._fill_nodes)
        self.node.currentIndexChanged.connect(self.check)
        self.set_pool(link.pool.view)
        link.adapters.changed.connect(self.set_adapters)
        self.load_draft()
        self.check()
        theme.notifier().changed.connect(self._scheme_changed)  # outlines re-coloured

    # -- the form ---------------------------------------------------------------------------
    def form(self) -> ComposeForm:
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
            cover_of=self._cover[0] if self._cover else None,
            cover_name=self._cover[1] if self._cover else "",
            strength=self.strength.value() / 100,
            faithful=self.faithful.isChecked(),
            reference=self._reference[0] if self._reference else None,
            reference_name=self._reference[1] if self._reference else "",
            **self._advanced_values(),
        )

    def set_form(self, form: ComposeForm) -> None:
        self.caption.setPlainText(form.caption)
        self.lyrics.setPlainText(form.lyrics)
        self.instrumental.setChecked(form.instrumental)
        self.duration.setText(form.duration)
        self.bpm.setText(form.bpm)
        self.key.setCurrentText(musical_keys.display(form.key) if form.key else "auto")
        idx = self.time_signature.findData(form.time_signature)
        self.time_signature.setCurrentIndex(max(0, idx))
        idx = self.language.findData(form.language)
        self.language.setCurrentIndex(max(0, idx))
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
        self._cover = (form.cover_of, form.cover_name) if form.cover_of else None
        self._reference = (form.reference, form.reference_name) if form.reference else None
        self.strength.setValue(int(round(form.strength * 100)))
        self.faithful.setChecked(form.faithful)
        self._show_starting()
        self.check()

    # -- advanced -----------------------------------------------------------------------------
    def advanced_fields(self):
        """The Advanced section, built now if this is its first use."""
        if self._advanced is None:
            from ..compose_advanced import AdvancedFields

            self._advanced = AdvancedFields(self)
            self._song_grid.insertRow(self._advanced_row + 1, self._advanced)  # then shown
            self._advanced.setVisible(self.advanced_toggle.isChecked())
            if self._adapters is not None:
                self._advanced.set_adapters(self._adapters)
            self._advanced.changed.connect(self.check)
        return self._advanced

    @property
    def adv_fields(self) -> dict:
        """The Advanced section's fields by name (building the section)."""
        return self.advanced_fields().fields

    def _advanced_values(self) -> dict:
        """The Advanced section's values; none (every one "auto") until it is built."""
        return self._advanced.values() if self._advanced is not None else {}

    def _fold(self, open_: bool) -> None:
        from .. import app_state

        self.advanced_fields().setVisible(open_)
        self._advanced_title()
        try:
            app_state.remember("compose_advanced_open", open_)
        except OSError:
            pass

    def _advanced_title(self) -> None:
        count = self.form().advanced_set
        arrow = "▾" if self.advanced_toggle.isChecked() else "▸"
        self.advanced_toggle.setText(f"Advanced {arrow}" + (f"  ({count} set)" if count else ""))

    def set_adapters(self, adapters: list) -> None:
        """The node's adapters, for the Advanced section's combo (kept until it is built)."""
        self._adapters = list(adapters)
        if self._advanced is not None:
            self._advanced.set_adapters(self._adapters)
        self.check()

    def _adapter_problem(self, form: ComposeForm) -> song_request.RequestError | None:
        """What the node would say about the chosen adapter: not installed, or made for
        the other size of DiT than the chosen model's."""
        name = form.adapter.strip()
        listed = self.link.adapters
        if not name or not listed.loaded:
            return None
        found = listed.get(name)
        if found is None:
            return song_request.RequestError(
                "adapter", f"{name} is not installed on the node (Library → Add adapter…)"
            )
        if found.get("problem"):
            return song_request.RequestError(
                "adapter", f"{name} cannot be used: {found['problem']}"
            )
        dit, model = found.get("dit"), form.model
        if dit and model and model != SKETCH_MODEL and (dit == "XL") != ("xl" in model.lower()):
            article = "an" if dit == "XL" else "a"
            return song_request.RequestError(
                "adapter", f"{name} was made for the {dit} DiT; choose {article} {dit} model"
            )
        return None

    # -- the language model's helpers -----------------------------------------------------
    def ask_lm(self, mode: str) -> None:
        """Inspire me (``inspire``: a short idea → caption and lyrics) or Tidy my lyrics
        (``format``): the node's language model fills the form for the musician to edit."""
        form = self.form()
        if not form.caption.strip() and mode == "inspire":
            self.problem.setText("Inspire me: write a short idea in Caption first")
            return
        body = {
            "caption": form.caption,
            "lyrics": "" if form.instrumental else form.lyrics,
            "model": form.model,
        }
        button = self.inspire if mode == "inspire" else self.tidy
        button.setEnabled(False)
        words = {"inspire": "Writing a song from your idea…", "format": "Tidying…"}[mode]
        self.problem.setText(words)

        def done(answer: dict) -> None:
            button.setEnabled(True)
            self.problem.setText("")
            if answer.get("caption"):
                self.caption.setPlainText(answer["caption"])
            if answer.get("lyrics") and not song_request.is_instrumental(answer["lyrics"]):
                self.instrumental.setChecked(False)
                self.lyrics.setPlainText(answer["lyrics"])
            for name, w in (("bpm", self.bpm), ("duration", self.duration)):
                if answer.get(name) and not w.text().strip():
                    w.setText(f"{answer[name]:g}")
            if answer.get("key") and self.key.currentText() == "auto":
                self.key.setCurrentText(musical_keys.display(answer["key"]))
            self.check()

        def failed(text: str) -> None:
            button.setEnabled(True)
            self.problem.setText(f"The language model could not help: {text}")

        self.link.songs.ask_lm(mode, body, on_done=done, on_error=failed)

    # -- a dropped audio file: understood, then the form filled from it -----------------------
    AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".aiff", ".aif", ".ogg")

    def dragEnterEvent(self, event) -> None:
        if self._dropped_audio(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        path = self._dropped_audio(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.fill_from_file(path)

    def _dropped_audio(self, mime) -> str | None:
        for url in mime.urls() if mime.hasUrls() else ():
            if url.isLocalFile() and url.toLocalFile().lower().endswith(self.AUDIO_EXTENSIONS):
                return url.toLocalFile()
        return None

    def fill_from_file(self, path: str) -> None:
        """Send the file to the node, let its model read it (caption, lyrics, tempo, key,
        time signature, length, language) and fill the form for the musician to edit."""
        import os

        name = os.path.basename(path)
        self.problem.setText(f"Listening to {name}…")

        def done(result) -> None:
            upload, heard = result
            self.heard_from = (upload, heard)
            if heard.get("caption"):
                self.caption.setPlainText(heard["caption"])
            lyrics = heard.get("lyrics")
            if lyrics and not song_request.is_instrumental(lyrics):
                self.instrumental.setChecked(False)
                self.lyrics.setPlainText(lyrics)
            else:
                self.instrumental.setChecked(True)
            for key, widget in (("bpm", self.bpm), ("duration", self.duration)):
                if heard.get(key):
                    widget.setText(f"{heard[key]:g}")
            if heard.get("key"):
                self.key.setCurrentText(musical_keys.display(heard["key"]))
            if heard.get("time_signature"):
                idx = self.time_signature.findData(str(heard["time_signature"]))
                self.time_signature.setCurrentIndex(max(0, idx))
            if heard.get("language"):
                idx = self.language.findData(heard["language"])
                self.language.setCurrentIndex(max(0, idx))
            self.set_reference(None)
            self.check()
            self.problem.setText(
                f"Filled from {name}: edit it, or make a cover of the file (Cover this file)"
            )
            self._dropped = ({"upload": upload["id"]}, name)
            self.cover_file.setVisible(True)

        self.link.songs.understand(
            path,
            on_done=done,
            on_error=lambda text: self.problem.setText(f"Could not read {name}: {text}"),
        )

    # -- covers and references --------------------------------------------------------------
    def set_cover(self, source: dict | None, name: str = "") -> None:
        """Make the next song a cover of ``source`` (a take of a song, or an upload)."""
        self._cover = (source, name) if source else None
        self._show_starting()
        self.check()

    def set_reference(self, source: dict | None, name: str = "") -> None:
        """Borrow the sound (timbre) of ``source`` for the next song."""
        self._reference = (source, name) if source else None
        self._show_starting()
        self.check()

    def _strength_changed(self, value: int) -> None:
        self.strength_words.setText(strength_words(value / 100))
        self.check()

    def _show_starting(self) -> None:
        self.starting.setVisible(bool(self._cover or self._reference))
        for w in (
            self.cover_label,
            self.strength,
            self.faithful,
            self.cover_clear,
            self.strength_words,
        ):
            w.setVisible(self._cover is not None)
        for w in (self.reference_label, self.reference_clear):
            w.setVisible(self._reference is not None)
        if self._cover:
            self.cover_label.setText(f"Cover of “{self._cover[1]}” — strength")
            self.strength_words.setText(strength_words(self.strength.value() / 100))
        if self._reference:
            self.reference_label.setText(
                f"Reference sound: “{self._reference[1]}” (its timbre "
                f"is borrowed; the song is still your caption's)"
            )

    def check(self) -> bool:
        """Name every field the node would refuse (all at once), outline them, and allow
        Generate only when there is none."""
        form = self.form()
        problems = form.problems()
        adapter = self._adapter_problem(form)
        if adapter is not None and all(p.field != "adapter" for p in problems):
            problems.append(adapter)
        node = self._node_problem(form.model)
        if node is not None:
            problems.append(node)
        self.seed.setEnabled(self.seed_lock.isChecked())
        bad = {p.field for p in problems}
        advanced = self._advanced.fields if self._advanced is not None else {}
        for name, widget in {**self.fields, **advanced}.items():
            outline = name in bad and (self._tried or _holds_input(widget))
            widget.setStyleSheet(theme.invalid_outline() if outline else "")
        self._advanced_title()
        if self._draft_timer is not None:
            self._draft_timer.start()
        if not problems:
            self.problem.setText("")
            self.generate.setEnabled(True)
            self.generate.setToolTip(self._generate_tip())
            return True
        text = "\n".join(f"{LABELS.get(p.field, p.field)} {p.message}" for p in problems)
        self.problem.setText(text)
        self.generate.setEnabled(False)
        self.generate.setToolTip(text)
        return False

    def _scheme_changed(self, _scheme: str) -> None:
        """(A method, not a lambda: the connection ends with the page.)"""
        self.check()

    def _generate_tip(self) -> str:
        return shortcuts.tip("Generate", self.generate_action.shortcuts())

    # -- the node's default format, live ----------------------------------------------------
    def _node_format(self) -> str:
        values = self.link.settings.node_config
        fmt = values.get("songs.format")
        if fmt in song_request.SONG_FORMATS:
            return fmt
        return config.current()[0].get("songs.format")

    def _node_settings(self, values: dict) -> None:
        """A changed default format reaches the form at once, unless one was chosen here."""
        fmt = values.get("songs.format")
        if fmt in song_request.SONG_FORMATS and not self._format_chosen:
            self.format.setCurrentText(fmt)

    # -- the draft ----------------------------------------------------------------------------
    _draft_timer = None

    def save_draft(self) -> None:
        """Keep what is typed (written off the GUI thread: an fsync can take a while)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a bare widget in a test): nothing to keep
            return
        data = json.dumps(self.form().to_json()).encode("utf-8")
        self.link.tasks.start(
            "draft",
            asyncio.to_thread(write_atomic, draft_file(), data),
            on_error=lambda text: log.warning("the compose draft could not be kept: %s", text),
        )

    def load_draft(self) -> None:
        try:
            data = json.loads(draft_file().read_text("utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict):
            form = ComposeForm.from_json(data)
            self._format_chosen = form.format != self._node_format()
            self.set_form(form)

    def _instrumental_toggled(self, on: bool) -> None:
        self.lyrics.setEnabled(not on)  # kept, greyed
        self.check()

    def _seed_lock_toggled(self, on: bool) -> None:
        if on and not self.seed.text().strip():
            form = self.form()
            self.seed.setText(str(form.lock_seed()))
        self.check()

    def set_models(self, models: list) -> None:
        """The node's ready models, and in a pool the models only other members have
        (named with who has them)."""
        self._models = list(models)
        current = self.model.currentData()
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItem(SKETCH_LABEL, SKETCH_MODEL)
        here = {SKETCH_MODEL}
        for m in models:
            name = m.get("name") if isinstance(m, dict) else str(m)
            state = m.get("state", "ready") if isinstance(m, dict) else "ready"
            if name and name != SKETCH_MODEL and state in ("ready", "installed", "downloaded"):
                self.model.addItem(m.get("title") or name if isinstance(m, dict) else name, name)
                here.add(canonical_model(name))
        for name, makers in sorted(self._pool_models().items()):
            if name not in here:
                self.model.addItem(f"{name} (on {', '.join(makers)})", name)
        idx = self.model.findData(current)
        self.model.setCurrentIndex(max(0, idx))
        self.model.blockSignals(False)

    # -- the pool: which member makes the song ----------------------------------------------
    def _pool_models(self) -> dict[str, list[str]]:
        """Every model a live member of the pool has → those members' names."""
        out: dict[str, list[str]] = {}
        for m in self._pool.alive if self._pool is not None else ():
            for model in m.models:
                out.setdefault(model, []).append(m.name)
        return out

    def set_pool(self, view: PoolView | None) -> None:
        """The node's pool (None: in none, and the Node choice is hidden)."""
        before = self._pool_models()
        self._pool = view
        self._song_grid.setRowVisible(self.node, view is not None)
        if self._pool_models() != before:
            self.set_models(self._models)
        self._fill_nodes()

    def _fill_nodes(self) -> None:
        """The Node list: "Any node", then each live member, one that lacks the chosen
        model greyed out (saying so); a chosen member that left the pool stays, marked,
        until another is chosen."""
        if self._pool is not None and not self._pool.reachable:
            return  # who is there is not known now: the list stays as it was
        current = self.node.currentData() or ""
        choices = [Choice(ANY_NODE, "")]
        if self._pool is not None:
            model = self.model.currentData() or SKETCH_MODEL
            for choice in self._pool.choices(model):
                choices.append(Choice(choice.label, choice.name, choice.usable))
            if current and all(row.data != current for row in choices):
                choices.append(Choice(f"{current} — not in the pool now", current, False))
        if tuple(choices) != self._node_choices.rows():  # unchanged: an open list is left alone
            self.node.blockSignals(True)
            self._node_choices.set_rows(choices)
            self.node.setCurrentIndex(max(0, self.node.findData(current)))
            self.node.blockSignals(False)
        self.check()

    def showEvent(self, event) -> None:  # noqa: N802 — the pool's members while shown
        super().showEvent(event)
        self.link.pool.show("compose", POOL_EVERY_S)

    def hideEvent(self, event) -> None:  # noqa: N802
        super().hideEvent(event)
        self.link.pool.show("compose", None)

    def chosen_node(self) -> str | None:
        """The member the song goes to (None: any member, or no pool)."""
        if self._pool is None:
            return None
        return self.node.currentData() or None

    def _node_problem(self, model: str) -> song_request.RequestError | None:
        """The chosen member cannot make the song: not in the pool now, or without the
        model (the node would refuse it)."""
        name = self.chosen_node()
        if name is None or self._pool is None or not self._pool.reachable:
            return None  # (an unreachable pool: the node says so when asked)
        member = self._pool.member(name)
        if member is None or not member.alive:
            return song_request.RequestError(
                "node", f"{name} is not in the pool now; choose {ANY_NODE} or another member"
            )
        if not member.can_make(model):
            return song_request.RequestError(
                "node", f"{name} does not have {model}; choose {ANY_NODE} or another member"
            )
        return None

    # -- generate and the queue ---------------------------------------------------------------
    def on_generate(self) -> None:
        self._tried = True
        if not self.check():
            return
        body = self.form().validated()
        self.generate.setEnabled(False)

        def failed(text: str) -> None:
            self.problem.setText(f"Could not queue the song: {text}")
            self.generate.setEnabled(True)

        def done(song: Song) -> None:
            self._tried = False
            self.check()
            self.generated.emit(song.id)

        self.link.songs.queue("submit", body, self.chosen_node(), on_done=done, on_error=failed)

    def show_song(self, song: Song) -> None:
        self.queue.show_song(song)

    def _row_action(self, song_id: str) -> None:
        song = self.link.songs.get(song_id)
        if song is None:
            return
        if song.state == SongState.DONE:
            self.play_song.emit(song_id)
        elif song.state in (SongState.FAILED, SongState.CANCELLED):
            self.link.songs.retry(song_id)
        else:
            self.link.songs.cancel(song_id)

    def queue_progress(self, song_id: str) -> float:
        return self.queue.progress(song_id)
