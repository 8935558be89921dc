#!/usr/bin/env bash
# Installs the built project into a scratch prefix, builds tests/package against it with a
# fresh CMake configure (no access to the source tree's internals) and runs the program.
# Usage: run-package-test.sh BUILD_DIR SCRATCH_DIR
set -euo pipefail
build=$1
scratch=$2
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$here" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
# The package must not leak the source tree's internal include folders.
if grep -rq -- "-I$(cd "$here/../.." && pwd)/src" "$scratch/build/build.ninja"; then
  echo "package test: the installed target exposes the source tree's src/ folder" >&2
  exit 1
fi
"$scratch/build/package_user"
