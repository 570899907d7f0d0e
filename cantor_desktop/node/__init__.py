"""The cantor node: the HTTP API, the persistent song queue and the engines behind it.

Modules: ``api`` (FastAPI app), ``queue`` (songs and their records), ``runner`` (songs on
engines), ``songs`` (audio files and sidecars), ``server`` (uvicorn and the token rules),
``launcher`` (start, stop and watch a node child process). Nothing here imports Qt.
"""
