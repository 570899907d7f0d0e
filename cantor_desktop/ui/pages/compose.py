"""Compose: the song form (checked as you type with the node's rules) and the live queue.

Every field the node would refuse is named at once (with the field's own label) and
outlined; Ctrl+Enter generates. What is typed is kept as a draft across restarts. The queue
shows the songs in flight; one that finished offers Play (in Songs), one that failed or was
cancelled offers Retry.
"""

from __future__ import annotations

import asyncio
import json
import logging

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFormLayout, QGridLayout, QGroupBox,
                               QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPlainTextEdit,
                               QProgressBar, QPushButton, QSlider, QSpinBox, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from ... import config, song_request
from ...paths import paths
from ...song import Song, SongState
from ..compose_form import KEYS, LYRICS_HINT, SKETCH_MODEL, ComposeForm
from ..song_records import status_text
from ..transfer import human_duration
from ..widgets import ComboBox, SpinBox

log = logging.getLogger(__name__)

SKETCH_LABEL = "Sketch — built-in, no AI model"
LABELS = {"caption": "Caption", "lyrics": "Lyrics", "duration": "Duration", "bpm": "BPM",
          "key": "Key", "time_signature": "Time signature", "language": "Language",
          "seed": "Seed", "model": "Model", "format": "Format", "batch": "Takes"}
BAD_FIELD = "border: 1px solid #c0392b; border-radius: 3px;"
DRAFT_SAVE_MS = 600


def draft_file():
    return paths().state_dir / "compose-draft.json"


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
        self._rows: dict[str, QTreeWidgetItem] = {}
        self._format_chosen = False
        outer = QVBoxLayout(self)
        title = QLabel("<h2>Compose</h2>")
        outer.addWidget(title)

        body = QHBoxLayout()
        outer.addLayout(body, 3)
        left = QVBoxLayout()
        body.addLayout(left, 3)
        self.caption = QPlainTextEdit()
        self.caption.setPlaceholderText("Describe the song: style, instruments, mood — e.g. "
                                        "“warm lo-fi piano, rain, slow groove”")
        self.caption.setFixedHeight(64)
        left.addWidget(QLabel("Caption"))
        left.addWidget(self.caption)
        lyr_head = QHBoxLayout()
        lyr_head.addWidget(QLabel("Lyrics"))
        lyr_head.addStretch(1)
        self.instrumental = QCheckBox("Instrumental")
        self.instrumental.setToolTip("Sends [Instrumental]; your lyrics are kept for later")
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
        self.seed_lock.setToolTip("Lock: reuse this seed for every take; unlocked: a new random seed")
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.seed_lock)
        self.model = ComboBox()
        self.format = ComboBox()
        self.format.addItems(config.SONG_FORMATS)
        self.takes = SpinBox()
        self.takes.setRange(*song_request.BATCH_RANGE)
        grid.addRow("Duration (s)", self.duration)
        grid.addRow("BPM", self.bpm)
        grid.addRow("Key", self.key)
        grid.addRow("Time signature", self.time_signature)
        grid.addRow("Language", self.language)
        grid.addRow("Seed", seed_row)
        grid.addRow("Model", self.model)
        grid.addRow("Format", self.format)
        grid.addRow("Takes", self.takes)

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
        self.strength_words.setStyleSheet("color: #6b7280;")
        self.faithful = QCheckBox("Faithful")
        self.faithful.setToolTip("Hear the source exactly, not through the model's codes: "
                                 "closer to the original, less room for the new caption")
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
        self.problem.setStyleSheet("color: #c0392b;")
        self.generate = QPushButton("Generate")
        self.generate.setDefault(True)
        self.generate.setMinimumWidth(140)
        action.addWidget(self.problem, 1)
        action.addWidget(self.generate)
        outer.addLayout(action)

        outer.addWidget(QLabel("<b>Queue</b>"))
        self.queue = QTreeWidget()
        self.queue.setColumnCount(5)
        self.queue.setHeaderLabels(["Song", "Stage", "Progress", "Time left", ""])
        self.queue.setRootIsDecorated(False)
        header = self.queue.header()
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        for col, width in ((1, 170), (2, 160), (3, 80), (4, 90)):
            header.setSectionResizeMode(col, QHeaderView.Fixed)
            header.resizeSection(col, width)
        outer.addWidget(self.queue, 2)

        self.fields = {"caption": self.caption, "lyrics": self.lyrics,
                       "duration": self.duration, "bpm": self.bpm, "key": self.key,
                       "time_signature": self.time_signature, "language": self.language,
                       "seed": self.seed, "model": self.model, "format": self.format,
                       "batch": self.takes}
        self.set_models([])
        self.format.setCurrentText(self._node_format())
        self.format.activated.connect(lambda _i: setattr(self, "_format_chosen", True))
        link.config_loaded.connect(self._node_settings)
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_SAVE_MS)
        self._draft_timer.timeout.connect(self.save_draft)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.WidgetWithChildrenShortcut)
            shortcut.activated.connect(self.on_generate)
        self.generate.setToolTip("Generate (Ctrl+Enter)")
        for w in (self.caption, self.lyrics):
            w.textChanged.connect(self.check)
        for w in (self.duration, self.bpm, self.seed):
            w.textChanged.connect(self.check)
        self.key.currentTextChanged.connect(self.check)
        for w in (self.time_signature, self.language, self.model, self.format):
            w.currentIndexChanged.connect(self.check)
        self.takes.valueChanged.connect(self.check)
        self.instrumental.toggled.connect(self._instrumental_toggled)
        self.seed_lock.toggled.connect(self._seed_lock_toggled)
        self.generate.clicked.connect(self.on_generate)
        link.song_updated.connect(self.show_song)
        link.models_loaded.connect(self.set_models)
        self.load_draft()
        self.check()

    # -- the form ---------------------------------------------------------------------------
    def form(self) -> ComposeForm:
        key = self.key.currentText().strip()
        return ComposeForm(
            caption=self.caption.toPlainText(), lyrics=self.lyrics.toPlainText(),
            instrumental=self.instrumental.isChecked(), duration=self.duration.text(),
            bpm=self.bpm.text(), key="" if key.lower() == "auto" else key,
            time_signature=self.time_signature.currentData() or "",
            language=self.language.currentData() or "", seed=self.seed.text(),
            seed_locked=self.seed_lock.isChecked(), model=self.model.currentData() or SKETCH_MODEL,
            format=self.format.currentText(), takes=self.takes.value(),
            cover_of=self._cover[0] if self._cover else None,
            cover_name=self._cover[1] if self._cover else "",
            strength=self.strength.value() / 100, faithful=self.faithful.isChecked(),
            reference=self._reference[0] if self._reference else None,
            reference_name=self._reference[1] if self._reference else "")

    def set_form(self, form: ComposeForm) -> None:
        self.caption.setPlainText(form.caption)
        self.lyrics.setPlainText(form.lyrics)
        self.instrumental.setChecked(form.instrumental)
        self.duration.setText(form.duration)
        self.bpm.setText(form.bpm)
        self.key.setCurrentText(form.key or "auto")
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
        self._cover = (form.cover_of, form.cover_name) if form.cover_of else None
        self._reference = (form.reference, form.reference_name) if form.reference else None
        self.strength.setValue(int(round(form.strength * 100)))
        self.faithful.setChecked(form.faithful)
        self._show_starting()
        self.check()

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
        for w in (self.cover_label, self.strength, self.faithful, self.cover_clear,
                  self.strength_words):
            w.setVisible(self._cover is not None)
        for w in (self.reference_label, self.reference_clear):
            w.setVisible(self._reference is not None)
        if self._cover:
            self.cover_label.setText(f"Cover of “{self._cover[1]}” — strength")
            self.strength_words.setText(strength_words(self.strength.value() / 100))
        if self._reference:
            self.reference_label.setText(f"Reference sound: “{self._reference[1]}” (its timbre "
                                         f"is borrowed; the song is still your caption's)")

    def check(self) -> bool:
        """Name every field the node would refuse (all at once), outline them, and allow
        Generate only when there is none."""
        problems = self.form().problems()
        self.seed.setEnabled(self.seed_lock.isChecked())
        bad = {p.field for p in problems}
        for name, widget in self.fields.items():
            widget.setStyleSheet(BAD_FIELD if name in bad else "")
        if self._draft_timer is not None:
            self._draft_timer.start()
        if not problems:
            self.problem.setText("")
            self.generate.setEnabled(True)
            self.generate.setToolTip("Generate (Ctrl+Enter)")
            return True
        text = "\n".join(f"{LABELS.get(p.field, p.field)} {p.message}" for p in problems)
        self.problem.setText(text)
        self.generate.setEnabled(False)
        self.generate.setToolTip(text)
        return False

    # -- the node's default format, live ----------------------------------------------------
    def _node_format(self) -> str:
        values = getattr(self.link, "node_config", None) or {}
        fmt = values.get("songs.format")
        if fmt in config.SONG_FORMATS:
            return fmt
        return config.current()[0].get("songs.format")

    def _node_settings(self, values: dict) -> None:
        """A changed default format reaches the form at once, unless one was chosen here."""
        fmt = values.get("songs.format")
        if fmt in config.SONG_FORMATS and not self._format_chosen:
            self.format.setCurrentText(fmt)

    # -- the draft ----------------------------------------------------------------------------
    _draft_timer = None

    def save_draft(self) -> None:
        """Keep what is typed (written off the GUI thread: an fsync can take a while)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:        # no loop (a bare widget in a test): nothing to keep
            return
        data = json.dumps(self.form().to_json()).encode("utf-8")
        self.link.tasks.start("draft", asyncio.to_thread(config.write_atomic, draft_file(), data),
                              on_error=lambda text: log.warning(
                                  "the compose draft could not be kept: %s", text))

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
        current = self.model.currentData()
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItem(SKETCH_LABEL, SKETCH_MODEL)
        for m in models:
            name = m.get("name") if isinstance(m, dict) else str(m)
            state = m.get("state", "ready") if isinstance(m, dict) else "ready"
            if name and name != SKETCH_MODEL and state in ("ready", "installed", "downloaded"):
                self.model.addItem(m.get("title") or name if isinstance(m, dict) else name, name)
        idx = self.model.findData(current)
        self.model.setCurrentIndex(max(0, idx))
        self.model.blockSignals(False)

    # -- generate and the queue ---------------------------------------------------------------
    def on_generate(self) -> None:
        if not self.check():
            return
        body = self.form().validated()
        self.generate.setEnabled(False)

        def failed(text: str) -> None:
            self.problem.setText(f"Could not queue the song: {text}")
            self.generate.setEnabled(True)

        def done(song: Song) -> None:
            self.check()
            self.generated.emit(song.id)

        self.link.tasks.start("submit", self.link.submit(body), on_error=failed, on_done=done)

    def show_song(self, song: Song) -> None:
        item = self._rows.get(song.id)
        if item is None:
            if song.is_finished:
                return  # history belongs to Songs; the queue shows what is in flight
            item = QTreeWidgetItem([song.name or song.id])
            self.queue.insertTopLevelItem(0, item)
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setTextVisible(True)
            action = QPushButton("Cancel")
            action.clicked.connect(lambda _=False, sid=song.id: self._row_action(sid))
            self.queue.setItemWidget(item, 2, bar)
            self.queue.setItemWidget(item, 4, action)
            self._rows[song.id] = item
        bar: QProgressBar = self.queue.itemWidget(item, 2)
        action: QPushButton = self.queue.itemWidget(item, 4)
        item.setText(0, song.name or song.id)
        text = status_text(song)
        item.setText(1, text.split(" — ")[0] if song.state == SongState.RUNNING else text)
        item.setToolTip(1, song.error or "")
        bar.setValue(int(song.progress * 1000))
        bar.setFormat(f"{int(song.progress * 100)}%")
        eta = song.eta if song.state == SongState.RUNNING else None
        item.setText(3, "" if eta is None else "under 1 s" if eta < 1 else human_duration(eta))
        seed = song.takes[0].seed if song.takes else None
        if song.state == SongState.DONE:
            item.setText(1, f"Done · seed {seed}" if seed is not None else "Done")
            action.setText("Play")
            action.setToolTip("Open it in Songs and play it")
        elif song.state in (SongState.FAILED, SongState.CANCELLED):
            action.setText("Retry")
            action.setToolTip("Queue it again with the same settings")
        else:
            action.setText("Cancel")
            action.setToolTip("")

    def _row_action(self, song_id: str) -> None:
        song = self.link.songs.get(song_id)
        if song is None:
            return
        if song.state == SongState.DONE:
            self.play_song.emit(song_id)
        elif song.state in (SongState.FAILED, SongState.CANCELLED):
            self.link.retry_song(song_id)
        else:
            self.link.cancel_song(song_id)

    def queue_progress(self, song_id: str) -> float:
        item = self._rows.get(song_id)
        return self.queue.itemWidget(item, 2).value() / 1000 if item else 0.0
