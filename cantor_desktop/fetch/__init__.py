"""The one downloader: ranged, resumable, verified transfers and their part files."""
