"""The model library: catalogue, files on disk, downloads (see issue 5)."""
