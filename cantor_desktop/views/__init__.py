"""What the app's pages show and allow, without Qt: each page's view-model (its state, its
checks, which buttons may act and the words it shows), read and tested without a window.

The widgets in ``ui/pages/`` draw a view-model and pass the user's clicks to it and to the
link's services; nothing here imports Qt, the link or the pages (``tests/test_layers.py``).
"""
