"""Compose: the song form (checked as you type with the node's rules) and the live queue."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFormLayout, QGridLayout, QGroupBox,
                               QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPlainTextEdit,
                               QProgressBar, QPushButton, QSpinBox, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from ... import config, song_request
from ..compose_form import KEYS, LYRICS_HINT, SKETCH_MODEL, ComposeForm
from ..song_records import SongRecord
from ..transfer import human_duration

SKETCH_LABEL = "Sketch — built-in, no AI model"


class ComposePage(QWidget):
    generated = Signal(str)  # song id

    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self._rows: dict[str, QTreeWidgetItem] = {}
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
        self.key = QComboBox()
        self.key.setEditable(True)
        self.key.addItem("auto")
        self.key.addItems(KEYS)
        self.time_signature = QComboBox()
        self.time_signature.addItem("auto", "")
        for ts in song_request.TIME_SIGNATURES:
            self.time_signature.addItem(f"{ts}/4", str(ts))
        self.language = QComboBox()
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
        self.model = QComboBox()
        self.format = QComboBox()
        self.format.addItems(config.SONG_FORMATS)
        self.takes = QSpinBox()
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

        self.set_models([])
        fmt = config.load_or_defaults()[0].get("songs.format")
        self.format.setCurrentText(fmt)
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
            format=self.format.currentText(), takes=self.takes.value())

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
        self.check()

    def check(self) -> bool:
        problem = self.form().problem()
        self.seed.setEnabled(self.seed_lock.isChecked())
        if problem is None:
            self.problem.setText("")
            self.generate.setEnabled(True)
            self.generate.setToolTip("")
            return True
        text = f"{problem.field.replace('_', ' ').capitalize()} {problem.message}"
        self.problem.setText(text)
        self.generate.setEnabled(False)
        self.generate.setToolTip(text)
        return False

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

        def done(rec: SongRecord) -> None:
            self.check()
            self.generated.emit(rec.id)

        self.link.tasks.start("submit", self.link.submit(body), on_error=failed, on_done=done)

    def show_song(self, rec: SongRecord) -> None:
        item = self._rows.get(rec.id)
        if item is None:
            if rec.finished and rec.id not in self._rows:
                return  # history belongs to Songs; the queue shows what is in flight
            item = QTreeWidgetItem([rec.caption or rec.id])
            self.queue.insertTopLevelItem(0, item)
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setTextVisible(True)
            cancel = QPushButton("Cancel")
            cancel.clicked.connect(lambda _=False, sid=rec.id: self.link.cancel_song(sid))
            self.queue.setItemWidget(item, 2, bar)
            self.queue.setItemWidget(item, 4, cancel)
            self._rows[rec.id] = item
        bar: QProgressBar = self.queue.itemWidget(item, 2)
        cancel: QPushButton = self.queue.itemWidget(item, 4)
        item.setText(1, rec.status_text().split(" — ")[0] if rec.state == "running"
                     else rec.status_text())
        item.setToolTip(1, rec.error or "")
        bar.setValue(int(rec.progress * 1000))
        bar.setFormat(f"{int(rec.progress * 100)}%")
        item.setText(3, human_duration(rec.eta) if rec.state == "running" else "")
        cancel.setEnabled(not rec.finished)
        if rec.state == "done" and rec.seed is not None:
            item.setText(1, f"Done · seed {rec.seed}")

    def queue_progress(self, song_id: str) -> float:
        item = self._rows.get(song_id)
        return self.queue.itemWidget(item, 2).value() / 1000 if item else 0.0
