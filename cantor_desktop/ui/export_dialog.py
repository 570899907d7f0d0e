"""Export…: the chosen takes as files a DAW understands, with the musician's choices
(format, sample rate, loudness and its true-peak ceiling, a name pattern), remembered.

The export itself is :mod:`cantor_desktop.export` run off the GUI thread (its progress comes
back through the loop); the original files are only read. Takes of a node on another machine
are fetched first (:class:`.song_files.SongFiles`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from .. import config, export
from ..song.record import Song, Take
from . import app_state, theme
from ..views.messages import DANGER
from .message_line import MessageLine
from .tasks import Tasks
from .widgets import ComboBox, DoubleSpinBox, ElidedLabel

LOUDNESS_CHOICES = (
    ("Off — the audio as it was made", None),
    ("−14 LUFS — streaming (Spotify, YouTube, Tidal)", -14.0),
    ("−16 LUFS — Apple Music, podcasts", -16.0),
    ("A target of my own…", "custom"),
)


def song_meta(song: Song, take: Take) -> export.SongMeta:
    """What the export writes into the file, from the song as the node sent it (and the
    take's sidecar where it is readable here)."""
    sidecar = None
    if take.sidecar:
        try:
            import json

            sidecar = json.loads(Path(take.sidecar).read_text("utf-8"))
        except (OSError, ValueError):
            sidecar = None
    return export.SongMeta.from_song(song.to_json(), take=take.n, sidecar=sidecar)


NAME_WIDTH = 260  # px of one song's name in the dialog's first line


def takes_summary(takes: list[tuple[Song, Take]], metrics, shown: int = 4) -> str:
    """The dialog's first line: how many takes, and the first few by name, each name cut
    with an ellipsis at a width (``metrics``: the label's QFontMetrics), never mid-word
    without one."""
    names = ", ".join(
        f"{metrics.elidedText(s.name, Qt.TextElideMode.ElideRight, NAME_WIDTH)} (take {t.n})"
        for s, t in takes[:shown]
    )
    more = f" and {len(takes) - shown} more" if len(takes) > shown else ""
    return f"{len(takes)} take{'s' if len(takes) != 1 else ''}: {names}{more}"


def export_takes(
    items: list[tuple[str, export.SongMeta]],
    folder: Path,
    options: export.ExportOptions,
    progress,
    cancel,
) -> list[export.ExportResult]:
    """Export each (local audio path, meta) in turn (a worker thread runs this)."""
    results = []
    for i, (path, meta) in enumerate(items):
        step = functools.partial(_report, progress, i, len(items))
        results.append(
            export.export_file(Path(path), folder, options, meta=meta, progress=step, cancel=cancel)
        )
    return results


def _report(progress, index: int, count: int, fraction: float, stage: str) -> None:
    """One file's progress as the whole export's (a module function, not a closure in the
    loop: Qt's lupdate loses the next class's strings after a def nested in a block;
    docs/upstream.md)."""
    progress((index + fraction) / count, stage, index)


class ExportDialog(QDialog):
    """Choose, then export; the choices are kept in node.toml's [export] table."""

    def __init__(self, takes: list[tuple[Song, Take]], files, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export")
        self.takes = takes
        self.files = files  # SongFiles: local copies of the takes
        self.tasks = Tasks()
        self._stop = threading.Event()
        self.results: list[export.ExportResult] = []
        cfg, _err = config.load_or_defaults()
        options = export.ExportOptions.from_config(cfg)

        form = QFormLayout()
        self.format = ComboBox()
        for name, (_fmt, _sub, ext, words) in export.FORMATS.items():
            self.format.addItem(f"{words} ({ext})", name)
        self.format.setCurrentIndex(self.format.findData(options.format))
        self.rate = ComboBox()
        self.rate.addItem("48 kHz (as made)", 48000)
        self.rate.addItem("44.1 kHz (CD, most DAWs' default)", 44100)
        self.rate.setCurrentIndex(self.rate.findData(options.rate))
        self.loudness = ComboBox()
        for words, value in LOUDNESS_CHOICES:
            self.loudness.addItem(words, value)
        self.target = DoubleSpinBox()
        self.target.setRange(*export.LOUDNESS_RANGE)
        self.target.setSuffix(" LUFS")
        self.target.setDecimals(1)
        self.target.setValue(options.loudness if options.loudness is not None else -14.0)
        preset = next(
            (i for i, (_w, v) in enumerate(LOUDNESS_CHOICES) if v == options.loudness),
            len(LOUDNESS_CHOICES) - 1,
        )
        self.loudness.setCurrentIndex(preset)
        self.peak = DoubleSpinBox()
        self.peak.setRange(*export.PEAK_RANGE)
        self.peak.setSuffix(" dBTP")
        self.peak.setDecimals(1)
        self.peak.setValue(options.peak)
        self.peak.setToolTip(
            "The highest a sample may reach after loudness is set, measured "
            "between samples (true peak): −1 dBTP leaves room for encoders"
        )
        self.pattern = QLineEdit(options.pattern)
        self.pattern.setToolTip("Fields: {title} {bpm} {key} {n} (take) {seed} {model} {date}")
        folder_row = QHBoxLayout()
        self.folder = QLineEdit(app_state.load().get("export_folder") or str(Path.home()))
        choose = QPushButton("Choose…")
        choose.clicked.connect(self._choose_folder)
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(choose)
        form.addRow("Format", self.format)
        form.addRow("Sample rate", self.rate)
        form.addRow("Loudness", self.loudness)
        form.addRow("Target", self.target)
        form.addRow("True-peak ceiling", self.peak)
        form.addRow("File names", self.pattern)
        form.addRow("Folder", folder_row)
        self.folder.setAccessibleName(self.tr("Folder"))  # its row's label names a layout
        self.remember = QCheckBox("Remember these choices")
        self.remember.setChecked(True)
        self.drag = QCheckBox("Songs dragged out of Cantor are exported like this too")
        self.drag.setChecked(bool(cfg.get("export.drag")))

        self.problem = MessageLine()
        self.preview = QLabel()
        theme.tone(self.preview, "muted")
        self.preview.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.go = self.buttons.addButton(
            f"Export {len(takes)} file{'s' if len(takes) != 1 else ''}",
            QDialogButtonBox.ButtonRole.AcceptRole,
        )
        self.go.clicked.connect(self.start)
        self.buttons.rejected.connect(self.stop_or_close)

        layout = QVBoxLayout(self)
        self.summary = ElidedLabel(takes_summary(takes, self.fontMetrics()))
        self.summary.set_tip("\n".join(f"{s.name} (take {t.n})" for s, t in takes))
        layout.addWidget(self.summary)
        layout.addLayout(form)
        layout.addWidget(self.remember)
        layout.addWidget(self.drag)
        layout.addWidget(self.preview)
        layout.addWidget(self.problem)
        layout.addWidget(self.bar)
        layout.addWidget(self.buttons)
        for combo in (self.format, self.rate, self.loudness):
            combo.currentIndexChanged.connect(self.check)
        for number in (self.target, self.peak):
            number.valueChanged.connect(self.check)
        self.pattern.textChanged.connect(self.check)
        self.folder.textChanged.connect(self.check)
        self.check()

    # -- the choices ----------------------------------------------------------------------
    def options(self) -> export.ExportOptions:
        """The choices as export options; ExportError names a field that is not allowed."""
        choice = self.loudness.currentData()
        loudness = self.target.value() if choice == "custom" else choice
        return export.ExportOptions(
            format=self.format.currentData(),
            rate=self.rate.currentData(),
            loudness=loudness,
            peak=self.peak.value(),
            pattern=self.pattern.text(),
        )

    def check(self, *_) -> bool:
        custom = self.loudness.currentData() == "custom"
        self.target.setEnabled(custom)
        self.peak.setEnabled(self.loudness.currentData() is not None)
        try:
            options = self.options()
        except export.ExportError as exc:
            self.problem.say(f"{exc.field.capitalize()}: {exc.message}", DANGER)
            self.go.setEnabled(False)
            return False
        if not self.folder.text().strip():
            self.problem.say("Folder: choose where the files go", DANGER)
            self.go.setEnabled(False)
            return False
        self.problem.clear()
        self.go.setEnabled(not self.tasks.running("export"))
        song, take = self.takes[0]
        try:
            from ..export import output_name

            name = output_name(song_meta(song, take), options, Path(take.file_name))
            self.preview.setText(f"First file: {name}")
        except Exception:  # a preview only: the export names its own problems
            self.preview.setText("")
        return True

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export to", self.folder.text())
        if folder:
            self.folder.setText(folder)

    # -- the export ------------------------------------------------------------------------
    def start(self) -> None:
        if not self.check():
            return
        options = self.options()
        folder = Path(self.folder.text().strip()).expanduser()
        if self.remember.isChecked():
            try:
                config.update({**options.config_changes(), "export.drag": self.drag.isChecked()})
                app_state.remember("export_folder", str(folder))
            except (config.ConfigError, OSError) as exc:
                self.problem.fail("keep the choices", str(exc))
        items = []
        for song, take in self.takes:
            local = self.files.ensure(song, take) if self.files is not None else take.audio
            if local is None:
                self.problem.say(
                    f"{song.name} (take {take.n}) is still being fetched "
                    f"from the node; export again in a moment",
                    DANGER,
                )
                return
            items.append((local, song_meta(song, take)))
        self._stop.clear()
        self.go.setEnabled(False)
        self.bar.show()
        loop = asyncio.get_running_loop()

        def progress(fraction: float, stage: str, index: int) -> None:  # worker thread
            loop.call_soon_threadsafe(self._progress, fraction, stage, index)

        self.tasks.start(
            "export",
            asyncio.to_thread(export_takes, items, folder, options, progress, self._stop.is_set),
            on_done=self._done,
            on_error=self._failed,
        )

    def _progress(self, fraction: float, stage: str, index: int) -> None:
        self.bar.setValue(int(fraction * 1000))
        self.bar.setFormat(f"{index + 1} of {len(self.takes)}: {stage} — %p%")

    def _done(self, results: list[export.ExportResult]) -> None:
        self.results = results
        self.bar.setValue(1000)
        self.bar.setFormat("Done")
        where = results[0].path.parent if results else ""
        self.preview.setText(f"Exported {len(results)} file(s) to {where}")
        self.buttons.clear()
        close = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.clicked.connect(self.accept)

    def _failed(self, text: str) -> None:
        self.bar.hide()
        self.go.setEnabled(True)
        if "ExportCancelled" in text:
            self.problem.say("Export stopped.")
        else:
            self.problem.fail("export", text)

    def stop_or_close(self) -> None:
        if self.tasks.running("export"):
            self._stop.set()  # the worker stops at its next check
            return
        self.reject()

    def done(self, result: int) -> None:
        self._stop.set()
        super().done(result)


def open_for(page) -> ExportDialog | None:
    """Export the selected takes (every take of a selected song's row set)."""
    takes = [(row.song, row.take) for row in page.view.selected_rows() if row.take is not None]
    if not takes:
        row = page.current_row()
        if row is None or row.take is None:
            return None
        takes = [(row.song, row.take)]
    dialog = ExportDialog(takes, page.files, page)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
