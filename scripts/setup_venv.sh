#!/usr/bin/env bash
# Create (or update) the project virtualenv with the exact pins of requirements/constraints.txt.
# Usage: scripts/setup_venv.sh [VENV_DIR]
#
# Order matters: torch first, then the k2 wheel built for the venv's Python, chosen by file
# name (scripts/install_wheel_for_python.py says why pip alone cannot), then everything else;
# pip keeps the k2 that is already installed because it satisfies the pin. Each step is
# checked, so a broken install stops here with a message instead of in the first test.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$here/.venv}
constraints="$here/requirements/constraints.txt"
if [ ! -x "$venv/bin/python" ]; then
  py=$(bash "$here/scripts/find_python.sh")
  echo "k2dec: creating $venv with $py ($("$py" --version 2>&1))"
  "$py" -m venv "$venv"
fi
vpy="$venv/bin/python"
ver=$("$vpy" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$ver" != "3.10" ]; then
  echo "k2dec: error: $venv has Python $ver; k2dec needs 3.10 (remove $venv and rerun)" >&2
  exit 1
fi
"$vpy" -m pip install --quiet --upgrade "pip>=23,<25" "setuptools>=61" wheel
echo "k2dec: installing pinned dependencies (first run downloads torch 1.13.1 + k2 1.23.4, ~2.5 GB)"
k2_pin=$(grep -E '^k2==' "$constraints")
"$vpy" -m pip install --quiet -c "$constraints" torch
"$vpy" "$here/scripts/install_wheel_for_python.py" "$k2_pin" --import-name k2
"$vpy" -m pip install --quiet -c "$constraints" -e "$here[dev,peers,audio]"
"$vpy" -c "import k2, torch; print('k2dec: venv ready: torch', torch.__version__, '| k2', k2.__dev_version__)" || {
  echo "k2dec: error: 'import k2' fails in $venv after installing everything (see above)." >&2
  exit 1
}
