"""One Cantor app per user and home: a second launch brings the first window up and exits.

The first app listens on a local socket named after the user and the home; a later launch
connects, says ``show`` and exits 0 before it makes a window or starts anything. The
installer's ``cantor-desktop --quit`` (:mod:`.quit_running`) says ``quit`` instead: the app
takes its one quit path (its node stops first) and lets its socket go last. A lock file
around the check-then-listen step keeps two launches at the same moment from both becoming
the first; a socket left by an app that was killed is removed when nobody answers on it.

On POSIX that is a Unix socket from the standard library, readable by this user only and
watched by a QSocketNotifier: Qt's network module would stay loaded for the life of the app
for it (about 3 MiB, and 30 ms before the first paint). A launch asks before any window
(:func:`another_app_answers`); the window paints, and only then does the app claim its
name. Two launches at the same moment still end with one app: the later claim finds the
first and exits. On Windows the socket is a named pipe, which only QLocalServer offers.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import hashlib
import logging
import os
import sys
from typing import TYPE_CHECKING

from PySide6.QtCore import QLockFile, QObject, QSocketNotifier, Signal

if TYPE_CHECKING:
    import socket

    from PySide6.QtNetwork import QLocalServer

log = logging.getLogger(__name__)

CONNECT_MS = 1000
SHOW = b"show\n"
QUIT = b"quit\n"
LONGEST_WORD = 64
"""A peer that sends more than this without a line is not a launch of ours: let it go."""


def instance_name(user: str | None = None, home: str | None = None) -> str:
    """``cantor-<16 hex>`` from the user and the home's key (short: a Unix socket path has
    a ~100-byte limit, and macOS's temporary folder is long)."""
    if user is None:
        try:
            user = getpass.getuser()
        except Exception:  # noqa: BLE001 - no login name (some containers)
            user = "?"
    if home is None:
        from ..auth.access import home_key

        home = home_key()
    return "cantor-" + hashlib.sha256(f"{user}\0{home}".encode()).hexdigest()[:16]


def socket_path(name: str) -> str:
    """Where QLocalServer puts a socket with a bare name on POSIX: QDir::tempPath()."""
    return os.path.join((os.environ.get("TMPDIR") or "/tmp").rstrip("/") or "/", name)


def another_app_answers(name: str, word: bytes = SHOW) -> bool | None:
    """Whether an app already listens as ``name`` (it is told ``word``: show itself, or
    quit), asked with the standard library; None where that cannot be known so (Windows'
    named pipes: :func:`tell_app`)."""
    if sys.platform == "win32":
        return None
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_MS / 1000)
    try:
        sock.connect(socket_path(name))
        sock.sendall(word)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def tell_app(name: str, word: bytes) -> bool:
    """Tell the app listening as ``name`` ``word``; False when none answers."""
    answered = another_app_answers(name, word)
    if answered is not None:
        return answered
    from PySide6.QtNetwork import QLocalSocket

    from ..system.foreground import allow_others_to_the_front

    if word == SHOW:
        allow_others_to_the_front()  # the first app may then come to the front
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(CONNECT_MS):
        return False
    sock.write(word)
    sock.flush()
    if sock.bytesToWrite():
        sock.waitForBytesWritten(CONNECT_MS)
    sock.disconnectFromServer()
    if sock.state() != QLocalSocket.LocalSocketState.UnconnectedState:
        sock.waitForDisconnected(CONNECT_MS)
    return True  # an app answers: it is the one, even if deaf


class SingleInstance(QObject):
    """``claim()`` → True: we are the app (``activated`` fires when a later launch asks for
    the window, ``quit_requested`` when the installer asks it to quit); False: another app
    got our request to show itself — exit 0."""

    activated = Signal()
    quit_requested = Signal()

    def __init__(self, name: str | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.name = name or instance_name()
        self.server: QLocalServer | None = None  # (Windows)
        self._clients: list = []  # its QLocalSockets
        self._listener: tuple[socket.socket, str, int, QSocketNotifier] | None = None  # (POSIX)
        """The socket we listen on, its path, its inode, its notifier."""
        self._peers: dict[QSocketNotifier, tuple] = {}
        self._retired: list[QSocketNotifier] = []
        """Notifiers of peers let go, freed outside their own signal. They have no Qt parent:
        Python owns them, so dropping the last reference deletes them (deleteLater on top of
        that deleted them twice)."""

    def claim(self) -> bool:
        from ..system.paths import paths

        folder = paths().state_dir
        folder.mkdir(parents=True, exist_ok=True)
        lock = QLockFile(str(folder / f"{self.name}.lock"))
        lock.setStaleLockTime(0)  # stale only when its owner is gone
        locked = lock.tryLock(5000)
        try:
            if self._hand_over():
                log.info("Cantor already runs for this user and home; asked it to show itself")
                return False
            return self._listen_pipe() if sys.platform == "win32" else self._listen_unix()
        finally:
            if locked:
                lock.unlock()

    def _hand_over(self) -> bool:
        return tell_app(self.name, SHOW)

    def _heard(self, line: bytes) -> None:
        if line == SHOW:
            log.info("another launch asked for the window")
            self.activated.emit()
        elif line == QUIT:
            log.info("asked to quit (cantor-desktop --quit: the installer)")
            self.quit_requested.emit()

    # -- POSIX: a Unix socket ------------------------------------------------------------

    def _listen_unix(self) -> bool:
        if sys.platform == "win32":  # Windows listens on a named pipe (_listen_pipe)
            return False
        import socket

        path = socket_path(self.name)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.bind(path)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                # nobody answered above, so this is a socket left by an app that was killed
                os.unlink(path)
                sock.bind(path)
            os.chmod(path, 0o600)  # this user only (no other user may connect)
            sock.listen(8)
            sock.setblocking(False)
            inode = os.stat(path).st_ino
        except OSError as exc:
            sock.close()
            log.warning("cannot listen as the single Cantor app (%s): %s", path, exc)
            return True  # run anyway: better two windows than none
        notifier = QSocketNotifier(sock.fileno(), QSocketNotifier.Type.Read)
        notifier.activated.connect(self._accept)
        self._listener = (sock, path, inode, notifier)
        return True

    def _accept(self, *_args) -> None:
        self._retired.clear()
        if self._listener is None:
            return
        while True:
            try:
                conn, _ = self._listener[0].accept()
            except OSError:  # none waiting (BlockingIOError), or closed
                return
            conn.setblocking(False)
            notifier = QSocketNotifier(conn.fileno(), QSocketNotifier.Type.Read)
            self._peers[notifier] = (conn, bytearray())
            notifier.activated.connect(self._read_peer)

    def _read_peer(self, *_args) -> None:
        notifier = self.sender()
        if notifier not in self._peers:
            return
        conn, pending = self._peers[notifier]
        try:
            data = conn.recv(256)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        pending += data
        while b"\n" in pending:
            line, _, rest = bytes(pending).partition(b"\n")
            pending[:] = rest
            self._heard(line + b"\n")
        if not data or len(pending) > LONGEST_WORD:  # gone, or not one of ours
            self._drop_peer(notifier)

    def _drop_peer(self, notifier: QSocketNotifier) -> None:
        conn, _ = self._peers.pop(notifier)
        notifier.setEnabled(False)
        self._retired.append(notifier)
        conn.close()

    # -- Windows: a named pipe -----------------------------------------------------------

    def _listen_pipe(self) -> bool:
        from PySide6.QtNetwork import QLocalServer

        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            QLocalServer.removeServer(self.name)
            if not server.listen(self.name):
                log.warning(
                    "cannot listen as the single Cantor app (%s): %s",
                    self.name,
                    server.errorString(),
                )
                return True  # run anyway: better two windows than none
        server.newConnection.connect(self._on_connection)
        self.server = server
        return True

    def _on_connection(self) -> None:
        while self.server is not None and self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()  # the server owns it
            self._clients.append(sock)
            sock.readyRead.connect(self._read_all)
            sock.disconnected.connect(self._read_all)
        self._read_all()

    def _read_all(self) -> None:
        """Read ``show`` from every connected launch (a socket is read here, in this
        object's slot, and let go once its peer has gone)."""
        for sock in list(self._clients):
            while sock.canReadLine():
                self._heard(bytes(sock.readLine().data()))
            if sock.state() == sock.LocalSocketState.UnconnectedState:
                self._clients.remove(sock)
                sock.deleteLater()

    def release(self) -> None:
        for notifier in list(self._peers):
            self._drop_peer(notifier)
        self._retired.clear()
        if self._listener is not None:
            sock, path, inode, notifier = self._listener
            self._listener = None
            notifier.setEnabled(False)
            sock.close()
            with contextlib.suppress(OSError):  # ours only: never a later app's socket
                if os.stat(path).st_ino == inode:
                    os.unlink(path)
        for sock in self._clients:
            sock.abort()
        self._clients.clear()
        if self.server is not None:
            self.server.close()
            self.server = None
