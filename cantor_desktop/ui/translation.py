"""The app's language: Qt's translators installed before the first window, for the app's own
strings (``cantor_desktop/data/i18n/cantor_<lang>.qm``, compiled from ``i18n/*.ts``) and for
Qt's (its standard buttons, the text fields' menus, the file dialogs: Qt's own
``qtbase_<lang>.qm``). The language is node.toml's ``app.language``, else ``CANTOR_LANGUAGE``,
else the first of the system's UI languages Cantor has, else English; numbers and dates
follow it through the default ``QLocale``."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QTranslator

SHIPPED = ("en", "de", "ja")
"""Languages Cantor is translated into (English is the strings themselves)."""
FOLDER = Path(__file__).resolve().parent.parent / "data" / "i18n"

_installed: list[QTranslator] = []  # kept alive as long as the app


def QT_TRANSLATE_NOOP(context: str, text: str) -> str:  # noqa: N802 (the name lupdate knows)
    """Mark ``text`` for translation in ``context`` where it is defined, returned as it is
    (shown through ``QCoreApplication.translate(context, text)`` or the class's ``tr``). Qt's
    own returns ``object`` to a type checker."""
    return text


def chosen(setting: str = "", system: list[str] | None = None) -> str:
    """The language to show: the setting, the environment's choice, the system's."""
    for wanted in (setting, os.environ.get("CANTOR_LANGUAGE", "")):
        code = wanted.strip().lower().replace("_", "-").split("-")[0]
        if code in SHIPPED:
            return code
    for ui in QLocale.system().uiLanguages() if system is None else system:
        code = ui.lower().replace("_", "-").split("-")[0]
        if code in SHIPPED:
            return code
    return "en"


def install(app: QCoreApplication, language: str) -> list[str]:
    """Install the translators for ``language`` on ``app``; the files loaded."""
    for old in _installed:
        app.removeTranslator(old)
    _installed.clear()
    QLocale.setDefault(QLocale(language))
    if language == "en":
        return []
    loaded = []
    qt_folder = QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)
    for name, folder in ((f"qtbase_{language}", qt_folder), (f"cantor_{language}", str(FOLDER))):
        translator = QTranslator(app)
        if translator.load(name, folder):
            app.installTranslator(translator)
            _installed.append(translator)
            loaded.append(name)
    return loaded
