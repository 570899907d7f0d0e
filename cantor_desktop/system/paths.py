"""Every folder and file location Cantor uses, in one place.

platformdirs decides by default; ``CANTOR_HOME=DIR`` puts everything under DIR (portable
installs and every test). No other module builds a Cantor path by hand: ask :func:`paths`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import platformdirs

APP_NAME = "Cantor"
HOME_ENV = "CANTOR_HOME"


@dataclass(frozen=True)
class Paths:
    """The folders of one Cantor installation, each where its OS keeps such files: settings
    (``config_dir``: node.toml), data (``data_dir``: models, engines, caches), state
    (``state_dir``: the queue, the token's file, uploads, latents), logs, and the songs
    folder used when ``songs.dir`` names none."""

    config_dir: Path
    data_dir: Path
    state_dir: Path
    logs_dir: Path
    default_songs_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "node.toml"

    @property
    def engines_dir(self) -> Path:
        return self.data_dir / "engines"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def cache_dir(self) -> Path:
        """Scratch space: probe model folders, downloads in flight, waveform peaks."""
        return self.data_dir / "cache"

    @property
    def engine_downloads_dir(self) -> Path:
        """Engine archives, by sha256, kept so builds that share one download get it once."""
        return self.cache_dir / "engines"

    @property
    def sketch_models_dir(self) -> Path:
        """The sketch engine's stand-in model files (it speaks ace-server's --models)."""
        return self.cache_dir / "sketch-models"

    @property
    def probe_models_dir(self) -> Path:
        """Tiny model folder a trial install loads to prove an engine build works."""
        return self.cache_dir / "probe-models"

    @property
    def waveforms_dir(self) -> Path:
        return self.cache_dir / "waveforms"

    @property
    def remote_songs_dir(self) -> Path:
        """Audio of songs made by a node on another machine, fetched once to play and drag."""
        return self.cache_dir / "remote-songs"

    @property
    def locks_dir(self) -> Path:
        return self.cache_dir / "locks"

    @property
    def stems_dir(self) -> Path:
        """Stems under their DAW names (hard links), made when a drag asks for them."""
        return self.cache_dir / "stems"

    @property
    def drag_exports_dir(self) -> Path:
        """A drag's exported files, made with the musician's export choices."""
        return self.cache_dir / "drag-exports"

    @property
    def uploads_dir(self) -> Path:
        """Audio sent to the node to be edited, until it is removed."""
        return self.state_dir / "uploads"

    @property
    def styles_dir(self) -> Path:
        """The styles every app and the CLI share (one JSON file each)."""
        return self.state_dir / "styles"

    @property
    def latents_dir(self) -> Path:
        """Each take's latent, kept so an edit starts from the take itself."""
        return self.state_dir / "latents"

    @property
    def app_state_file(self) -> Path:
        return self.state_dir / "app-state.json"

    @property
    def compose_draft_file(self) -> Path:
        return self.state_dir / "compose-draft.json"

    def manifest_cache_file(self, key: str) -> Path:
        """The last engine manifest fetched from one URL (``key`` names the URL)."""
        return self.cache_dir / f"manifest-{key}.json"

    @property
    def library_file(self) -> Path:
        """Model files adopted from elsewhere (``cantor models import``)."""
        return self.models_dir / "library.json"

    @property
    def hashes_file(self) -> Path:
        """sha256 of model files with the size and mtime they were taken at."""
        return self.models_dir / "hashes.json"

    def catalogue_file(self, family: str) -> Path:
        """The model hub's file tree for a family, saved for offline use."""
        return self.models_dir / f"catalogue-{family}.json"

    def engine_backend_dir(self, family: str, backend: str) -> Path:
        return self.engines_dir / family / backend

    def model_family_dir(self, family: str) -> Path:
        return self.models_dir / family

    @property
    def queue_file(self) -> Path:
        return self.state_dir / "queue.json"

    @property
    def node_engines_file(self) -> Path:
        """Engine processes the node started (pid, command), so a restarted node can end
        the ones a killed node left behind."""
        return self.state_dir / "engines.json"

    @property
    def node_log(self) -> Path:
        return self.logs_dir / "node.log"

    def engine_log(self, family: str) -> Path:
        return self.logs_dir / f"engine-{family}.log"

    @property
    def app_log(self) -> Path:
        return self.logs_dir / "app.log"

    @property
    def cli_log(self) -> Path:
        return self.logs_dir / "cli.log"

    def ensure(self) -> "Paths":
        """Create every folder (not the songs folder, which node.toml may move)."""
        for d in (
            self.config_dir,
            self.data_dir,
            self.state_dir,
            self.logs_dir,
            self.engines_dir,
            self.models_dir,
            self.cache_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        return self


def paths(env: Mapping[str, str] | None = None) -> Paths:
    """The folders in force now: under ``$CANTOR_HOME`` when set, else platformdirs'.

    ``env`` asks for the folders a process with that environment would use (a child node
    started with its own ``CANTOR_HOME``)."""
    home = (os.environ if env is None else env).get(HOME_ENV)
    if home:
        root = Path(home).expanduser().resolve()
        return Paths(
            config_dir=root,
            data_dir=root,
            state_dir=root / "state",
            logs_dir=root / "logs",
            default_songs_dir=root / "songs",
        )
    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
    return Paths(
        config_dir=Path(dirs.user_config_dir),
        data_dir=Path(dirs.user_data_dir),
        state_dir=Path(dirs.user_state_dir),
        logs_dir=Path(dirs.user_log_dir),
        default_songs_dir=Path(platformdirs.user_music_dir()) / APP_NAME,
    )
