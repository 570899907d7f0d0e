"""The adapter store's belief about the names ace-server gives its adapters, checked
against the real binary (the Sketch's side is in tests/test_adapters.py)."""

from __future__ import annotations

from support.adapter_files import engine_adapter_names, store_for_engines


def test_the_real_ace_server_names_the_adapters_as_the_store_says(real_engine, tmp_path):
    store, models = store_for_engines(tmp_path)
    names, log = engine_adapter_names(
        [str(real_engine)], models, store.folder, tmp_path, env={"GGML_BACKEND": "CPU"}
    )
    assert names == ["b-tape.safetensors", "zz.safetensors", "a-style"]  # files, then folders
    assert sorted(names) == sorted(a.engine_name for a in store.list())
    assert "[Registry] Adapter: a-style (PEFT)" in log and "3 Adapter" in log
