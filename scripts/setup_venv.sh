#!/usr/bin/env bash
# Create (or update) the project virtualenv with the exact pins of requirements/constraints.txt.
# Usage: scripts/setup_venv.sh [VENV_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
  py=$(bash "$here/scripts/find_python.sh")
  echo "k2dec: creating $venv with $py ($("$py" --version 2>&1))"
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade "pip<25" "setuptools>=61" wheel
echo "k2dec: installing pinned dependencies (first run downloads torch 1.13.1 + k2 1.23.4, ~2.5 GB)"
"$venv/bin/python" -m pip install --quiet -c "$here/requirements/constraints.txt" -e "$here[dev,peers]"
"$venv/bin/python" -c "import k2, torch; print('k2dec: venv ready: torch', torch.__version__, '| k2', k2.__dev_version__)"
