"""The app and the CLI against a node that is not this home's (another machine's, here a
node with its own CANTOR_HOME): it works with that node's token, it says so without it, and
settings land on the node's side — never in this home's node.toml."""

from __future__ import annotations

import asyncio
import os
import subprocess

from cantor_desktop.system.selfexec import self_argv

from support.node import Node, write_config
from support.ui import run, until


def _their_node(tmp_path) -> Node:
    home = tmp_path / "their-home"
    home.mkdir()
    write_config(home)
    return Node(home, env={"CANTOR_HOME": str(home)})


def test_cli_sings_on_a_remote_node_with_its_token_and_says_when_it_has_none(cantor_home, tmp_path):
    node = _their_node(tmp_path)
    asyncio.run(node.start())
    try:
        base = [
            *self_argv("cli"),
            "sing",
            "remote lofi",
            "--model",
            "sketch",
            "--duration",
            "10",
            "--node",
            node.url,
        ]
        env = {**os.environ, "CANTOR_HOME": str(cantor_home)}
        env.pop("CANTOR_NODE_TOKEN", None)
        without = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
        with_token = subprocess.run(
            base,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "CANTOR_NODE_TOKEN": node.proc.token},
        )
    finally:
        asyncio.run(node.stop())
    assert without.returncode == 1
    assert without.stderr.startswith("cantor sing: a valid bearer token is required")
    assert "cantor node token" in without.stderr  # where to get one
    assert with_token.returncode == 0, with_token.stderr
    made = with_token.stdout.strip().splitlines()[-1]
    assert made.startswith(str(node.home)) and os.path.exists(made)
    assert (
        not (cantor_home / "songs").exists() and not (cantor_home / "state" / "queue.json").exists()
    )


def test_app_drives_a_remote_node_with_the_token_the_user_gave(qapp, qloop, cantor_home, tmp_path):
    from cantor_desktop.system.secrets import set_secret
    from cantor_desktop.ui.node_link import REMOTE_TOKEN, NodeLink
    from cantor_desktop.ui.pages.settings import SettingsPage

    node = _their_node(tmp_path)
    run(qloop, node.start())
    try:
        # no token given yet: the node cannot prove ours, and the app says so
        link = NodeLink(url=node.url, start_child=False)
        run(qloop, link.connection.open())
        assert (
            link.connection.state == "error"
            and "could not prove it holds" in link.connection.detail
        )
        run(qloop, link.shutdown())

        set_secret(REMOTE_TOKEN, node.proc.token)
        link = NodeLink(url=node.url, start_child=False)
        run(qloop, link.connection.open())
        assert link.connection.state == "idle" and link.connection.remote
        page = SettingsPage(link)
        run(qloop, until(lambda: link.settings.node_config, what="the node's settings"))
        mine = (
            (cantor_home / "node.toml").read_bytes()
            if (cantor_home / "node.toml").exists()
            else None
        )
        # the node's own settings are shown; the ones only its machine may set are read-only
        assert page.value("songs.dir") == str(node.home / "songs")
        assert not page.fields["songs.dir"].isEnabled()
        assert "cantor config set songs.dir" in page.notes["songs.dir"].text()
        assert not page.fields["engines.manifest"].isEnabled()
        assert page.fields["node.keep_loaded"].isEnabled()
        page.set_value("node.keep_loaded", True)
        page._check()
        page.save()
        run(
            qloop,
            until(
                lambda: link.settings.node_config.get("node.keep_loaded") is True,
                what="the node's keep_loaded",
            ),
        )
        songs = run(qloop, link.connection.client.songs())
        run(qloop, link.shutdown())
    finally:
        run(qloop, node.stop())
    assert "keep_loaded = true" in (node.home / "node.toml").read_text()
    now = (cantor_home / "node.toml").read_bytes() if (cantor_home / "node.toml").exists() else None
    assert now == mine  # nothing landed in this home's node.toml
    assert songs == []


def test_the_app_names_another_homes_node_on_its_address_and_starts_none(
    qapp, qloop, cantor_home, tmp_path
):
    """Another install's node on this home's port cannot prove it holds our token: the app
    sends it none, says what is on the port, and starts no node beside it."""
    from cantor_desktop import config
    from cantor_desktop.ui.node_link import NodeLink

    theirs = _their_node(tmp_path)
    run(qloop, theirs.start())
    config.update({"node.port": theirs.proc.port, "models.default": "sketch"})
    link = NodeLink()  # this home's link, its own node wanted
    try:
        run(qloop, link.connection.open(), timeout=60)
        assert link.connection.state == "error" and not link.connection.owns_node
        assert f"something else answers on port {theirs.proc.port}" in link.connection.detail
    finally:
        run(qloop, link.shutdown())
        run(qloop, theirs.stop())
    refused = (theirs.home / "logs" / "node.log").read_text()
    assert "refused" not in refused  # it was never even sent a wrong token
