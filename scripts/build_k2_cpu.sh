#!/usr/bin/env bash
# Build k2's Python extension without CUDA kernels (K2_WITH_CUDA=OFF) from a k2 source kit for
# the torch of a venv, and make `import k2` work in that venv (a .pth file). Used by
# scripts/test_modern.sh; done once: a later call with the same kit and venv only checks.
# Usage: scripts/build_k2_cpu.sh KIT CACHE VENV_PYTHON JOBS
#
# KIT is a folder with k2/ (k2's source) and deps/pybind11 (used instead of a download); its copy
# goes to CACHE/kit (k2's configure writes into the source tree) and the build to CACHE/k2build.
# A torch from PyPI is a CUDA build whose CMake files ask for a CUDA toolkit even when k2 builds
# no CUDA code: then nvcc's toolkit is used for its headers and libraries (CUDA_HOME, or the
# toolkit of the nvcc on PATH), with nvrtc from the toolkit or torch's nvidia wheels.
set -euo pipefail
kit=$1 cache=$2 vpy=$3 jobs=$4
say() { echo "build_k2_cpu: $*"; }
die() { echo "build_k2_cpu: error: $*" >&2; exit 1; }
build=$cache/k2build
sig=$(cat "$kit"/SOURCES.txt "$kit"/PATCHES.diff 2>/dev/null | sha256sum | cut -c1-16)
torch_version=$("$vpy" -c 'import torch; print(torch.__version__)')

if [ "$(cat "$cache/kit/.k2dec-kit" 2>/dev/null)" != "$sig" ]; then
  rm -rf "$cache/kit" "$build"
  cp -r "$kit" "$cache/kit"
  chmod -R u+w "$cache/kit"
  echo "$sig" > "$cache/kit/.k2dec-kit"
fi
src=$cache/kit

if [ "$(cat "$build/.k2dec-built" 2>/dev/null)" != "$sig torch=$torch_version" ]; then
  args=(
    -S "$src/k2" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17
    -DK2_WITH_CUDA=OFF -DK2_ENABLE_TESTS=OFF -DK2_ENABLE_BENCHMARK=OFF
    -DK2_SKIP_TORCH_API=ON                    # the kit's patch: no k2 C++ torch API
    -DPYTHON_EXECUTABLE="$vpy" -DPYBIND11_FINDPYTHON=OFF
    -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON -DFETCHCONTENT_SOURCE_DIR_PYBIND11="$src/deps/pybind11"
  )
  if [ -n "$("$vpy" -c 'import torch; print(torch.version.cuda or "")')" ]; then
    nvcc=$(command -v nvcc || true)
    cuda=${CUDA_HOME:-}
    if [ -z "$cuda" ] && [ -n "$nvcc" ]; then   # nvcc may be a wrapper script: ask it
      : > "$cache/probe.cu"
      cuda=$("$nvcc" --dryrun -c "$cache/probe.cu" -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
      rm -f "$cache/probe.cu"
      cuda=$(readlink -f "${cuda:-$(dirname "$nvcc")/..}")
    fi
    [ -n "$cuda" ] && [ -x "$cuda/bin/nvcc" ] || die "torch $torch_version is a CUDA build and its
CMake files need a CUDA toolkit (headers, nvcc) even for a CPU-only k2: install one (or set
CUDA_HOME), or use a CPU build of torch"
    nvrtc=$(ls "$cuda"/lib64/libnvrtc.so "$cuda"/targets/x86_64-linux/lib/libnvrtc.so 2>/dev/null \
      | head -1 || true)
    [ -n "$nvrtc" ] || nvrtc=$("$vpy" -c 'import glob, os, torch
root = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia")
print(next(iter(sorted(glob.glob(root + "/*/lib/libnvrtc.so*"))), ""))')
    [ -n "$nvrtc" ] || die "no libnvrtc in $cuda nor in torch's nvidia wheels"
    say "torch $torch_version is a CUDA build: CUDA toolkit $cuda, nvrtc $nvrtc (no CUDA code is built)"
    export CUDA_PATH=$cuda PATH=$cuda/bin:$PATH
    args+=(-DCUDA_TOOLKIT_ROOT_DIR="$cuda" -DCUDA_nvrtc_LIBRARY="$nvrtc")
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    say "configuring k2 ($src/k2) for torch $torch_version"
    nice cmake "${args[@]}" > "$cache/configure.log" 2>&1 \
      || { tail -30 "$cache/configure.log"; die "configure failed (log: $cache/configure.log)"; }
  fi
  say "building k2 with $jobs jobs (the first time takes long: about 75 files; log: $cache/build.log)"
  start=$(date +%s)
  nice cmake --build "$build" --target _k2 -j "$jobs" > "$cache/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$cache/build.log" | head -30; die "build failed (log: $cache/build.log)"; }
  say "built in $(( $(date +%s) - start )) s"
  echo "$sig torch=$torch_version" > "$build/.k2dec-built"
fi

site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$src/k2/k2/python" "$build/lib" > "$site/k2dec-k2-from-source.pth"
"$vpy" -c 'import k2, torch; k2.RaggedTensor([[1, 2], [3]]); k2.Fsa.from_str("0 1 1 0.5\n1 2 -1 0\n2")' \
  || die "import k2 fails in $(dirname "$(dirname "$vpy")") after the build"
