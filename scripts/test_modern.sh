#!/usr/bin/env bash
# `make test-modern`: the whole test suite on a second, modern stack, on CPU: CPython 3.12, a
# torch 2.x from PyPI, numpy 2, the newest releases of the other dependencies, and k2 v1.24.4
# built from source for that Python and torch (a CPU-only build) from the k2 source kit (by
# default ../shared/gpu-k2 beside the checkout: k2 at v1.24.4 with its patches, pybind11 and
# moderngpu sources; see its README.md). Not part of .ci/run: the first run builds k2, which
# takes long on a small machine (see README, "Tested stacks").
#
# Everything is kept outside the repository in $K2DEC_MODERN_CACHE (default
# ~/.cache/k2dec/modern): the venv, a copy of the kit and the k2 build. A later run reuses them
# and only runs the tests; changing the Python, the torch version or the kit starts over.
#
# Environment (all optional):
#   K2DEC_MODERN_PYTHON  the interpreter (default: CPython 3.12, found by scripts/find_python.sh)
#   K2DEC_MODERN_TORCH   the torch release installed from PyPI (default 2.11.0)
#   K2DEC_K2_KIT         the k2 source kit (default ../shared/gpu-k2 from the repository root)
#   K2DEC_MODERN_CACHE   the cache folder
#   JOBS                 compile jobs for k2 (default: the number of CPUs)
#   PYTEST_ARGS          what pytest runs (default: "-q -p no:cacheprovider tests")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K2DEC_MODERN_CACHE:-$HOME/.cache/k2dec/modern}
torch_version=${K2DEC_MODERN_TORCH:-2.11.0}
kit=${K2DEC_K2_KIT:-$root/../shared/gpu-k2}
jobs=${JOBS:-$(nproc)}
say() { echo "test-modern: $*"; }
die() { echo "test-modern: error: $*" >&2; exit 1; }

[ -f "$kit/k2/CMakeLists.txt" ] && [ -d "$kit/deps/pybind11" ] \
  || die "no k2 source kit at $kit (k2/ and deps/pybind11/); set K2DEC_K2_KIT"
kit=$(cd "$kit" && pwd)
py=$(K2DEC_PYTHON=${K2DEC_MODERN_PYTHON:-} bash "$root/scripts/find_python.sh" 3.12)
mkdir -p "$cache"
venv=$cache/venv
vpy=$venv/bin/python
build=$cache/k2build

# 1. The venv: Python + torch + numpy 2 (+ the torchaudio of that torch, when PyPI has one).
stack="python=$("$py" -c 'import sys; print(sys.version.split()[0])') torch=$torch_version"
if [ "$(cat "$venv/.k2dec-stack" 2>/dev/null)" != "$stack" ]; then
  say "creating $venv ($stack); torch from PyPI is a CUDA build of several GB"
  rm -rf "$venv" "$build"
  "$py" -m venv "$venv"
  nice "$vpy" -m pip install --quiet --upgrade pip setuptools wheel
  nice "$vpy" -m pip install --quiet "torch==$torch_version" "numpy>=2"
  nice "$vpy" -m pip install --quiet "torchaudio==$torch_version" "torch==$torch_version" \
    || { say "no torchaudio $torch_version on PyPI; installing scipy (lhotse resamples with it)"
         nice "$vpy" -m pip install --quiet scipy; }
  echo "$stack" > "$venv/.k2dec-stack"
fi

# 2. k2 from the kit, built once per kit and venv.
bash "$root/scripts/build_k2_cpu.sh" "$kit" "$cache" "$vpy" "$jobs"

# 3. k2dec's other dependencies (pyproject's, with the dev, peers and audio extras), never
#    replacing torch or asking PyPI for a k2.
"$vpy" - "$root/pyproject.toml" > "$cache/requirements.txt" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
reqs = list(project["dependencies"])
for extra in ("dev", "peers", "audio"):
    reqs += project["optional-dependencies"][extra]
for req in reqs:
    if re.split(r"[<>=!~ \[;]", req, maxsplit=1)[0].lower() not in ("torch", "k2", "torchaudio"):
        print(req)
EOF
# lhotse 1.32.1 fails on torch 2.11 (its samplers pass torch's Sampler a data_source argument,
# which newer torch refuses); 1.32.2 and later call Sampler.__init__() without it.
printf 'torch==%s\nlhotse>=1.32.2\n' "$torch_version" > "$cache/constraints.txt"
# lhotse 1.33.0 imports urllib3 (lhotse/ais) without declaring it.
echo "urllib3" >> "$cache/requirements.txt"
if [ "$(cat "$venv/.k2dec-deps" 2>/dev/null)" != "$(cat "$cache/requirements.txt")" ]; then
  say "installing k2dec's dependencies"
  nice "$vpy" -m pip install --quiet -c "$cache/constraints.txt" -r "$cache/requirements.txt"
  cp "$cache/requirements.txt" "$venv/.k2dec-deps"
fi

"$vpy" -c 'import k2.version, numpy, torch, lhotse, sys
print("test-modern: Python", sys.version.split()[0], "| torch", torch.__version__, "| numpy",
      numpy.__version__, "| k2", k2.version.__version__, "| lhotse", lhotse.__version__)'

# 4. The tests, of this checkout (installed in editable mode, as `make` does, so that the
#    tests' subprocesses import it too).
nice "$vpy" -m pip install --quiet --no-deps --no-build-isolation -e "$root" \
  > "$cache/editable.log" 2>&1 || { cat "$cache/editable.log"; die "installing $root failed"; }
cd "$root"
# shellcheck disable=SC2086
PATH=$venv/bin:$PATH "$vpy" -m pytest ${PYTEST_ARGS:--q -p no:cacheprovider tests}
