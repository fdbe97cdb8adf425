#!/usr/bin/env bash
# Print the path of a CPython X.Y interpreter (default 3.10), or explain what to install and exit 1.
# Usage: scripts/find_python.sh [X.Y]
#
# Looked for, in order:
#   1. $K2DEC_PYTHON (an explicit interpreter path or command name)
#   2. pythonX.Y on PATH (pyenv shims that fail to run are skipped)
#   3. pyenv's newest X.Y.z ($(pyenv root)/versions/X.Y.*/bin/python)
#   4. common install prefixes (/usr/bin, /usr/local/bin, conda's base)
# 3.10 is `make`'s default: k2 1.23.4 on PyPI is built for CPython 3.10 + torch 1.13.1 only.
# `make test-modern` asks for 3.12 (it builds k2 from source for that Python).
set -u
want=${1:-3.10}

is_wanted() {
  local cand="$1"
  [ -n "$cand" ] || return 1
  local ver
  ver=$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  [ "$ver" = "$want" ] || return 1
  "$cand" -c 'import venv, ensurepip' >/dev/null 2>&1 || return 1
  return 0
}

if [ -n "${K2DEC_PYTHON:-}" ]; then
  if is_wanted "$K2DEC_PYTHON"; then
    command -v "$K2DEC_PYTHON" 2>/dev/null || echo "$K2DEC_PYTHON"
    exit 0
  fi
  echo "error: K2DEC_PYTHON=$K2DEC_PYTHON is not a working CPython $want with venv and ensurepip." >&2
  exit 1
fi

candidates=()
if command -v "python$want" >/dev/null 2>&1; then
  candidates+=("$(command -v "python$want")")
fi
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  if [ -n "$root" ]; then
    for d in $(ls -d "$root"/versions/"$want".* 2>/dev/null | sort -t. -k3 -n -r); do
      candidates+=("$d/bin/python")
    done
  fi
fi
for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*; do
  [ -x "$d/bin/python" ] && candidates+=("$d/bin/python")
done
candidates+=("/usr/bin/python$want" "/usr/local/bin/python$want" "/opt/conda/bin/python$want" python3)

for cand in "${candidates[@]}"; do
  if is_wanted "$cand"; then
    command -v "$cand" 2>/dev/null || echo "$cand"
    exit 0
  fi
done

if [ "$want" = "3.10" ]; then
  why="k2dec's pinned stack needs CPython 3.10 because the only k2 wheel on PyPI (k2 1.23.4) is
built for Python 3.10 + torch 1.13.1."
  var=K2DEC_PYTHON
else
  why="make test-modern tests k2dec on CPython $want (it builds k2 from source for it)."
  var=K2DEC_MODERN_PYTHON
fi
cat >&2 <<MSG
error: no Python $want interpreter found.
$why Install one of:
  - Debian/Ubuntu:  apt-get install python$want python$want-venv
  - pyenv:          pyenv install $want
  - conda:          conda create -n py${want/./} python=$want
and rerun, or point $var at it:  make ... $var=/path/to/python$want
MSG
exit 1
