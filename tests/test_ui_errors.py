"""What the app says about an error: decided by its kind (isinstance), not its class name."""

from __future__ import annotations


def test_errors_reach_the_user_by_their_kind_not_their_class_name():
    import httpx

    from cantor_desktop.config import ConfigError
    from cantor_desktop.client.nodeclient import NodeError
    from cantor_desktop.song.request import RequestError
    from cantor_desktop.ui.tasks import describe_error

    class Subclassed(NodeError):  # a name describe_error has never heard of
        pass

    assert (
        describe_error(Subclassed("the queue is full (node.max_queue = 2)", 429))
        == "the queue is full (node.max_queue = 2)"
    )
    assert (
        describe_error(RequestError("bpm", "must be from 30 to 300"))
        == "bpm: must be from 30 to 300"
    )
    assert describe_error(ConfigError("node.toml: line 2, column 6: …")).startswith("node.toml")
    assert (
        describe_error(httpx.ConnectError("refused")) == "The node does not answer (is it running?)"
    )
    assert (
        describe_error(httpx.ConnectTimeout("no answer"))
        == "The node does not answer (is it running?)"
    )
    assert describe_error(httpx.ReadTimeout("slow")) == "The node took too long to answer"
    assert describe_error(KeyError("x")) == "KeyError: 'x'"
