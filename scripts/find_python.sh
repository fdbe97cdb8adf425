#!/usr/bin/env bash
# Print the path of a Python 3.10 interpreter, or explain what to install and exit 1.
#
# Looked for, in order:
#   1. $K2DEC_PYTHON (an explicit interpreter path or command name)
#   2. python3.10 on PATH (pyenv shims that fail to run are skipped)
#   3. pyenv's newest 3.10.x ($(pyenv root)/versions/3.10.*/bin/python)
#   4. common install prefixes (/usr/bin, /usr/local/bin, conda's base)
# k2 1.23.4 on PyPI is built for CPython 3.10 + torch 1.13.1 only, hence the pin.
set -u

is_py310() {
  local cand="$1"
  [ -n "$cand" ] || return 1
  local ver
  ver=$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  [ "$ver" = "3.10" ] || return 1
  "$cand" -c 'import venv, ensurepip' >/dev/null 2>&1 || return 1
  return 0
}

if [ -n "${K2DEC_PYTHON:-}" ]; then
  if is_py310 "$K2DEC_PYTHON"; then
    command -v "$K2DEC_PYTHON" 2>/dev/null || echo "$K2DEC_PYTHON"
    exit 0
  fi
  echo "error: K2DEC_PYTHON=$K2DEC_PYTHON is not a working CPython 3.10 with venv and ensurepip." >&2
  exit 1
fi

candidates=()
if command -v python3.10 >/dev/null 2>&1; then
  candidates+=("$(command -v python3.10)")
fi
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  if [ -n "$root" ]; then
    for d in $(ls -d "$root"/versions/3.10.* 2>/dev/null | sort -t. -k3 -n -r); do
      candidates+=("$d/bin/python")
    done
  fi
fi
for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*; do
  [ -x "$d/bin/python" ] && candidates+=("$d/bin/python")
done
candidates+=(/usr/bin/python3.10 /usr/local/bin/python3.10 /opt/conda/bin/python3.10 python3)

for cand in "${candidates[@]}"; do
  if is_py310 "$cand"; then
    command -v "$cand" 2>/dev/null || echo "$cand"
    exit 0
  fi
done

cat >&2 <<'MSG'
error: no Python 3.10 interpreter found.
k2dec needs CPython 3.10 because the only k2 wheel on PyPI (k2 1.23.4) is built for
Python 3.10 + torch 1.13.1. Install one of:
  - Debian/Ubuntu:  apt-get install python3.10 python3.10-venv
  - pyenv:          pyenv install 3.10.13
  - conda:          conda create -n py310 python=3.10
and rerun, or point K2DEC_PYTHON at it:  make test K2DEC_PYTHON=/path/to/python3.10
MSG
exit 1
