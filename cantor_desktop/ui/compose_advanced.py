"""Compose's Advanced section: the engine's knobs (steps, guidance, the language model's
sampling, an adapter), folded away under the song's fields.

The page builds it the first time it is needed: unfolded, or a form to show that sets one
of its values (a draft, "Use these settings"). Until then every value is its default ("auto",
no adapter), which is what :class:`ComposeForm` holds when nothing is set, and the window
starts without its dozen fields (~0.2 MiB).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLineEdit,
    QWidget,
)

from ..song import request as song_request
from ..views.compose_form import ComposeForm
from .widgets import ComboBox

ADVANCED_ROWS = (
    ("steps", "Steps", "Diffusion steps: turbo models use 8, SFT and base 50; more is slower"),
    (
        "guidance",
        "Guidance",
        "How closely the audio follows the caption (ignored above 1 on turbo models)",
    ),
    ("shift", "Shift", "Where the steps spend their effort: turbo 3, others 1"),
    ("solver", "Solver", "The sampler: euler (default), sde, dpm3m, stork4"),
    ("lm_temperature", "LM temperature", "How adventurous the language model is (0.85)"),
    ("lm_cfg", "LM CFG", "How closely the language model follows the caption (2.0)"),
    ("lm_top_p", "LM top-p", "Nucleus sampling of the language model (0.9)"),
    ("lm_top_k", "LM top-k", "Only the k likeliest tokens (0: off)"),
    ("lm_negative_prompt", "Negative prompt", "What the language model should steer away from"),
    ("lock_caption", "Lock my caption", "Keep the caption exactly as written"),
    (
        "adapter",
        "Adapter",
        "A LoRA adapter of the node: a style or a voice of its own (Library → Add adapter…)",
    ),
    (
        "adapter_scale",
        "Adapter scale",
        "How strongly the adapter applies: 0 not at all, 1 as trained, up to 2",
    ),
)
NO_ADAPTER = "none"
PRESETS = {
    "turbo": {"steps": 8, "guidance": 1.0, "shift": 3.0},
    "sft": {"steps": 50, "guidance": 1.0, "shift": 1.0},
}
"""ace-server's own presets (its /props); the engine's defaults for its models."""


class AdvancedFields(QGroupBox):
    """The fields, by the names :class:`ComposeForm` gives them; ``changed`` when any is
    edited."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        rows = QFormLayout(self)
        self.fields: dict[str, QWidget] = {}
        for name, label, tip in ADVANCED_ROWS:
            w = self._field(name)
            w.setToolTip(tip)
            rows.addRow(label, w)
            self.fields[name] = w
        self.preset = ComboBox()
        self.preset.addItem("—", None)
        for name, values in PRESETS.items():
            self.preset.addItem(
                f"{name}: {values['steps']} steps, guidance "
                f"{values['guidance']:g}, shift {values['shift']:g}",
                name,
            )
        self.preset.setToolTip("The engine's own settings for turbo and SFT/base models")
        self.preset.activated.connect(self._apply_preset)
        rows.insertRow(0, "Preset", self.preset)

    def _field(self, name: str) -> QWidget:
        if name == "solver":
            solver = ComboBox()
            solver.addItem("auto", "")
            for each in song_request.SOLVERS:
                solver.addItem(each, each)
            solver.currentIndexChanged.connect(self.changed)
            return solver
        if name == "lock_caption":
            lock = QCheckBox("the language model may not rewrite it")
            lock.toggled.connect(self.changed)
            return lock
        if name == "adapter":
            self.adapter = ComboBox()
            self.adapter.addItem(NO_ADAPTER, "")
            self.adapter.currentIndexChanged.connect(self._adapter_chosen)
            return self.adapter
        if name == "adapter_scale":
            self.adapter_scale = QDoubleSpinBox()
            self.adapter_scale.setRange(*song_request.ADAPTER_SCALE_RANGE)
            self.adapter_scale.setSingleStep(0.05)
            self.adapter_scale.setDecimals(2)
            self.adapter_scale.setValue(1.0)
            self.adapter_scale.setEnabled(False)
            self.adapter_scale.valueChanged.connect(self.changed)
            return self.adapter_scale
        text = QLineEdit()
        text.setPlaceholderText("auto" if name != "lm_negative_prompt" else "none")
        text.textChanged.connect(self.changed)
        return text

    # -- values --------------------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The fields as :class:`ComposeForm` holds them."""
        out: dict[str, Any] = {}
        for name, w in self.fields.items():
            if isinstance(w, QCheckBox):
                out[name] = w.isChecked()
            elif isinstance(w, QDoubleSpinBox):  # the scale goes with an adapter only
                out[name] = f"{w.value():g}" if self.adapter.currentData() else ""
            elif isinstance(w, QComboBox):
                out[name] = w.currentData() or ""
            elif isinstance(w, QLineEdit):
                out[name] = w.text()
        return out

    def set_values(self, form: ComposeForm) -> None:
        for name, w in self.fields.items():
            value = getattr(form, name)
            if isinstance(w, QCheckBox):
                w.setChecked(bool(value))
            elif name == "adapter":
                self.choose_adapter(str(value))
            elif isinstance(w, QDoubleSpinBox):
                try:
                    w.setValue(float(value) if str(value).strip() else 1.0)
                except ValueError:
                    w.setValue(1.0)
            elif isinstance(w, QComboBox):
                w.setCurrentIndex(max(0, w.findData(value)))
            elif isinstance(w, QLineEdit):
                w.setText(str(value))

    def _apply_preset(self, _index: int) -> None:
        values = PRESETS.get(self.preset.currentData() or "")
        if values:
            for name in ("steps", "guidance", "shift"):
                field = self.fields[name]
                if isinstance(field, QLineEdit):
                    field.setText(f"{values[name]:g}")

    # -- adapters ------------------------------------------------------------------------------
    def set_adapters(self, adapters: list) -> None:
        """The node's adapters in the combo (the choice kept; one no longer installed is
        kept too, marked, and the page says why it cannot go)."""
        combo = self.adapter
        current = combo.currentData() or ""
        combo.blockSignals(True)
        combo.clear()
        combo.addItem(NO_ADAPTER, "")
        for a in adapters:
            combo.addItem(a["name"], a["name"])
            tip = a.get("made_for") or f"cannot be used: {a.get('problem')}"
            combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        combo.blockSignals(False)
        self.choose_adapter(current)

    def choose_adapter(self, name: str) -> None:
        combo = self.adapter
        combo.blockSignals(True)
        idx = combo.findData(name) if name else 0
        if idx < 0:
            combo.addItem(f"{name} (not installed)", name)
            idx = combo.count() - 1
        combo.setCurrentIndex(idx)
        combo.blockSignals(False)
        self.adapter_scale.setEnabled(bool(name))

    def _adapter_chosen(self, _index: int) -> None:
        self.adapter_scale.setEnabled(bool(self.adapter.currentData()))
        self.changed.emit()
