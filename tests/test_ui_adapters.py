"""Adapters in the app, against real nodes: the Library lists them (what each was made for)
and adds them (by path on this home's node, uploaded to a remote one) or removes them;
Compose's Advanced offers the installed ones, follows the list as it changes, and a song
made with one carries it to the engine."""

from __future__ import annotations

import json
from pathlib import Path

from support.ui import run, until

from support.adapter_files import comfyui_file, peft_folder, sd_unet_file
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.compose import ComposePage
from cantor_desktop.ui.pages.library import LibraryPage


def _pages(qtbot, qloop, url: str):
    link = NodeLink(url=url, start_child=False)
    library, compose = LibraryPage(link), ComposePage(link)
    qtbot.addWidget(library)
    qtbot.addWidget(compose)
    run(qloop, link.connection.open())
    run(qloop, until(lambda: link.adapters.loaded, what="the adapters"))
    return link, library, compose


def _combo(compose: ComposePage) -> list[tuple[str, str]]:
    combo = compose.adv_fields["adapter"]
    return [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]


def test_library_adds_and_removes_and_compose_follows(qtbot, qloop, node, cantor_home, tmp_path):
    tape = comfyui_file(tmp_path / "tape.safetensors")
    style = peft_folder(tmp_path / "my-style")
    sd = sd_unet_file(tmp_path / "sdxl.safetensors")
    link, library, compose = _pages(qtbot, qloop, node.url)
    assert not link.connection.remote and library.adapter_table.rowCount() == 0
    assert library.adapters_note.text().startswith("none yet")
    assert _combo(compose) == [("none", "")]
    assert not compose.adv_fields["adapter_scale"].isEnabled()

    library.add_adapters([str(tape), str(style), str(sd)])
    run(qloop, until(lambda: "Not added" in library.message.text(), what="the outcome"))
    text = library.message.text()
    assert "Added tape (made for ACE-Step 1.5 (2B DiT))" in text and "Added my-style" in text
    assert "Not added: sdxl.safetensors was made for sdxl_base_v1-0" in text
    table = library.adapter_table
    assert [table.item(r, 0).text() for r in range(table.rowCount())] == ["my-style", "tape"]
    assert table.item(0, 2).text() == "ACE-Step 1.5 (2B DiT)"
    assert "base model: ACE-Step/Ace-Step1.5" in table.item(0, 0).toolTip()
    assert table.item(1, 1).text().endswith("KiB")
    assert library.adapters_note.text().startswith("2 adapter(s)")
    # Compose: the list arrived by itself
    run(qloop, until(lambda: len(_combo(compose)) == 3, what="the combo"))
    assert _combo(compose) == [("none", ""), ("my-style", "my-style"), ("tape", "tape")]
    combo = compose.adv_fields["adapter"]
    combo.setCurrentIndex(combo.findData("tape"))
    scale = compose.adv_fields["adapter_scale"]
    assert scale.isEnabled()
    scale.setValue(0.6)
    compose.caption.setPlainText("warm tape pop")
    compose.instrumental.setChecked(True)
    compose.duration.setText("10")
    body = compose.form().validated()
    assert body["adapter"] == "tape" and body["adapter_scale"] == 0.6
    ids = []
    compose.generated.connect(ids.append)
    compose.generate.click()
    run(qloop, until(lambda: ids, what="the song"))
    run(
        qloop,
        until(
            lambda: link.songs.get(ids[0]) and link.songs.by_id[ids[0]].state == "done",
            timeout=40,
            what="the song to be done",
        ),
        timeout=45,
    )
    sidecar = json.loads(
        Path(link.songs.by_id[ids[0]].takes[0].audio).with_suffix(".json").read_text("utf-8")
    )
    assert sidecar["engine_request"]["adapter"] == "tape.safetensors"
    assert sidecar["engine_request"]["adapter_scale"] == 0.6
    # removed in the Library: Compose keeps the choice, marked, and says why it cannot go
    library.remove_adapter("tape", confirm=False)
    run(qloop, until(lambda: table.rowCount() == 1, what="the row to go"))
    assert "tape removed" in library.message.text()
    run(
        qloop,
        until(
            lambda: ("tape (not installed)", "tape") in _combo(compose), what="the combo to follow"
        ),
    )
    assert not compose.generate.isEnabled()
    assert "Adapter tape is not installed on the node" in compose.problem.text()
    assert not (cantor_home / "models" / "adapters" / "tape.safetensors").exists()
    combo.setCurrentIndex(0)
    assert compose.generate.isEnabled() and "adapter" not in compose.form().validated()
    run(qloop, link.shutdown())


def test_a_remote_node_gets_files_uploaded_and_refuses_folders(qtbot, qloop, cantor_home, tmp_path):
    from cantor_desktop.system.secrets import set_secret
    from cantor_desktop.ui.node_link import REMOTE_TOKEN
    from test_node_library_routes import their_node

    tape = comfyui_file(tmp_path / "tape.safetensors")
    style = peft_folder(tmp_path / "my-style")
    sd = sd_unet_file(tmp_path / "sdxl.safetensors")
    theirs = their_node(tmp_path)
    run(qloop, theirs.start())
    try:
        set_secret(REMOTE_TOKEN, theirs.proc.token)
        link, library, compose = _pages(qtbot, qloop, theirs.url)
        assert link.connection.remote
        library.add_adapters([str(tape), str(style), str(sd)])
        run(qloop, until(lambda: "Not added" in library.message.text(), what="outcome"), timeout=30)
        text = library.message.text()
        assert "Added tape" in text
        assert "my-style: a PEFT folder can be added only on the node's own machine" in text
        assert "sdxl.safetensors was made for sdxl" in text
        folder = theirs.home / "models" / "adapters"
        assert sorted(p.name for p in folder.iterdir()) == ["tape.safetensors"]  # sd never sent
        assert (folder / "tape.safetensors").read_bytes() == tape.read_bytes()
        assert "on the node's machine" in library.adapters_note.text()
        run(qloop, until(lambda: ("tape", "tape") in _combo(compose), what="the combo"))
        run(qloop, link.shutdown())
    finally:
        run(qloop, theirs.stop())


def test_a_draft_naming_an_adapter_keeps_it_until_the_list_arrives(qtbot, qloop):
    from cantor_desktop.views.compose_form import ComposeForm

    link = NodeLink(url="http://127.0.0.1:9", start_child=False)
    compose = ComposePage(link)
    qtbot.addWidget(compose)
    compose.set_form(ComposeForm(caption="x", adapter="tape", adapter_scale="1.5"))
    assert compose.form().adapter == "tape" and compose.form().adapter_scale == "1.5"
    assert compose.generate.isEnabled()  # the node's list is not known yet
    link.adapters.set(
        {
            "adapters": [{"name": "tape", "made_for": "ACE-Step 1.5 (XL DiT)", "dit": "XL"}],
            "folder": "/x",
        }
    )
    assert _combo(compose) == [("none", ""), ("tape", "tape")]
    assert compose.form().adapter == "tape"
    compose.model.addItem("ACE-Step Turbo", "acestep-v15-turbo-Q8_0")
    compose.model.setCurrentIndex(compose.model.count() - 1)
    assert "tape was made for the XL DiT; choose an XL model" in compose.problem.text()
    assert not compose.generate.isEnabled()
