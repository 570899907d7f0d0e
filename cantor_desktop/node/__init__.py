"""The cantor node: the HTTP API, the persistent song queue and the engines behind it.

Modules: ``api`` (FastAPI app; its routes in the ``*_routes`` modules, over ``http_common``,
``schemas`` and ``state``), ``queue`` (songs and their records), ``runner`` (songs on
engines), ``songs`` (audio files and sidecars), ``server`` (uvicorn and the token rules).
Nothing here imports Qt, and nothing here is client code: starting, stopping and watching a
node child is ``cantor_desktop.client.node_process``, talking to a node ``cantor_desktop.client.nodeclient``.
"""
