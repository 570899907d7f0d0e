"""Styles in the app against a real node: Compose saves the form as a style (its reference
sound copied by the node), applies it to a fresh form (the musician's lyrics kept, the rest
filled and editable), and the picker lists what the node keeps
(cantor_desktop/ui/style_picker.py over cantor_desktop/views/styles.py)."""

from __future__ import annotations

from support.ui import make_wav, run, until

from cantor_desktop.views import styles as words
from test_ui_compose import make_page


def test_entries_and_words():
    found = [{"name": "Night drive"}, {"name": "Borrowed", "missing": [{"text": "the adapter x"}]}]
    assert words.entries(found) == [
        ("No style", ""),
        ("Night drive", "Night drive"),
        ("Borrowed (needs a part)", "Borrowed"),
    ]
    assert words.applied(found[1]).tone == "warning"
    assert "lacks the adapter x" in words.applied(found[1]).text
    assert words.applied({"name": "A", "reference": {"upload": "x"}}).text.endswith(
        "its caption, settings and reference sound are in the form, yours to change"
    )


def test_save_the_form_as_a_style_and_apply_it_to_a_new_song(
    qtbot, qloop, node, tmp_path, monkeypatch
):
    from PySide6.QtWidgets import QInputDialog

    link, page = make_page(qtbot, node.url)
    run(qloop, link.connection.open())
    sound = run(qloop, link.connection.client.upload(make_wav(tmp_path / "voice.wav")))
    page.caption.setPlainText("dreamy synthwave, warm pads")
    page.bpm.setText("96")
    page.key.setCurrentText("A minor")
    page.set_reference({"upload": sound["id"]}, "voice.wav")
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Night drive", True))
    picker = page.style_picker
    picker.save()
    run(qloop, until(lambda: picker.choice.findData("Night drive") >= 0, what="the saved style"))
    assert picker.current() == "Night drive"
    kept = link.styles.get("Night drive")
    assert kept["fields"]["bpm"] == 96 and kept["reference"]["upload"] != sound["id"]

    # a new song: other words, the style chosen
    page.caption.setPlainText("something else")
    page.bpm.setText("")
    page.set_reference(None)
    page.lyrics.setPlainText("[Verse]\nmy own words")
    picker.choice.setCurrentIndex(picker.choice.findData("Night drive"))
    picker.choice.activated.emit(picker.choice.currentIndex())
    assert page.caption.toPlainText() == "dreamy synthwave, warm pads"
    assert page.bpm.text() == "96" and page.key.currentText() == "A minor"
    assert page.lyrics.toPlainText() == "[Verse]\nmy own words"
    assert page.form().reference == kept["reference"]
    assert page.problem.text().startswith("Style Night drive applied")
    page.bpm.setText("120")  # still editable
    assert page.form().validated()["bpm"] == 120
    run(qloop, link.shutdown())
