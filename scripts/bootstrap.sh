#!/usr/bin/env bash
# Sets up a fresh Debian machine for pipesim and builds it.
#   scripts/bootstrap.sh [extra cmake arguments]
#   PIPESIM_FUZZ=1 scripts/bootstrap.sh   also installs clang for the fuzzers (fuzz/)
#   BUILD_TARGETS=pipesim scripts/bootstrap.sh   builds only the command line
# Installs the Debian packages below when any is missing (as root, or through sudo),
# configures a Release build in ${BUILD_DIR:-build} and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build libboost-graph-dev libyaml-cpp-dev libfmt-dev libbenchmark-dev
          libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
          libopenmpi-dev openmpi-bin  # MPI: optional for the build, used by mpirun sweeps
          pybind11-dev python3-dev     # the Python module
          python3-torch                # the torch backend (validate --backend torch)
          python3-matplotlib)          # plots/ (run with Debian's /usr/bin/python3)
# PIPESIM_FUZZ=1 (CI): clang and its libFuzzer runtime for the fuzz/ targets.
if [ "${PIPESIM_FUZZ:-0}" = 1 ]; then packages+=(clang libclang-rt-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# BUILD_TARGETS="pipesim ...": only those (the quick start builds the command line alone).
# shellcheck disable=SC2086
cmake --build "$build" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
