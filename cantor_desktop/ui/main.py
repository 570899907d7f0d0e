"""`cantor-desktop`: start Qt, the qasync loop and the main window."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_API", "pyside6")  # qasync must pick PySide6


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from PySide6.QtWidgets import QApplication
    import qasync

    from .. import logs
    from ..paths import paths
    from .window import MainWindow

    logs.setup(paths().app_log)
    app = QApplication.instance() or QApplication(argv)
    app.setApplicationName("Cantor")
    app.setQuitOnLastWindowClosed(False)
    window = MainWindow()
    window.show()
    app.setQuitOnLastWindowClosed(True)
    return qasync.run(_until_quit(app)) or 0


async def _until_quit(app) -> int:
    import asyncio
    done = asyncio.get_running_loop().create_future()
    app.aboutToQuit.connect(lambda: done.done() or done.set_result(0))
    return await done


if __name__ == "__main__":
    sys.exit(main())
