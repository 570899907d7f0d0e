"""The window's pages: each a thin widget over NodeLink and a Qt-free view-model."""
