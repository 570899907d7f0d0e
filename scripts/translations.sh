#!/usr/bin/env bash
# The app's translations. Every string the code marks (a widget's tr(), QCoreApplication.
# translate(), QT_TRANSLATE_NOOP) is gathered into i18n/cantor_<lang>.ts by Qt's lupdate
# (new strings arrive unfinished, for a translator to fill in with Qt Linguist:
# .venv/bin/pyside6-linguist i18n/cantor_de.ts); lrelease compiles each into
# cantor_desktop/data/i18n/cantor_<lang>.qm, which the package ships and
# cantor_desktop/ui/translation.py loads. tests/test_translations.py checks that both are up
# to date and every string is translated.
#   scripts/translations.sh        update the .ts files from the code, compile the .qm files
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
mapfile -t sources < <(git ls-files 'cantor_desktop/*.py')
for ts in i18n/cantor_*.ts; do
  .venv/bin/pyside6-lupdate -no-obsolete -locations none "${sources[@]}" -ts "$ts"
  lang="$(basename "$ts" .ts)"
  .venv/bin/pyside6-lrelease -silent "$ts" -qm "cantor_desktop/data/i18n/$lang.qm"
done
