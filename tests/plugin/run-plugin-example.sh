#!/usr/bin/env bash
# The example plug-in end to end: install the built project into a scratch prefix, build
# examples/plugin against it out of tree, and drive the plug-in's operator through every command
# of the CLI. Without a GPU, the GPU commands must refuse with exit 2 and a clear message.
# Usage: run-plugin-example.sh BUILD_DIR SCRATCH_DIR PLUGIN_SOURCE_DIR
set -euo pipefail
build=$1
scratch=$2
src=$3
cli="$build/tilepilot"
rm -rf "$scratch"
mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
plug="$scratch/build/libtilepilot_softcap.so"
tp() { "$cli" --plugin "$plug" "$@"; }
fail() { echo "plugin example: $*" >&2; exit 1; }
expect_rc() { # expect_rc RC MESSAGE-PATTERN command...
  local want=$1 pattern=$2
  shift 2
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $out"
  echo "$out" | grep -Eq -- "$pattern" || fail "'$*' did not print /$pattern/: $out"
}

# ops: listed with its origin; the built-ins are still there.
expect_rc 0 '"name": "softcap"' tp ops --json
expect_rc 0 'libtilepilot_softcap.so' tp ops --json
expect_rc 0 '"name": "gemm"' tp ops --json
# The same through $TILEPILOT_PLUGINS.
expect_rc 0 '"name": "softcap"' env TILEPILOT_PLUGINS="$plug" "$cli" ops --json
# Without the plug-in the operator is unknown, and the message says how to load it.
expect_rc 2 "unknown operator 'softcap'.*--plugin" "$cli" check softcap --shape T=7,V=1000
# show: every stage that needs no GPU.
expect_rc 0 'softcap' tp show softcap --stage ir
expect_rc 0 'extern "C"' tp show softcap --stage cuda --arch sm_90a
expect_rc 0 'threads per block' tp show softcap --stage resources --arch sm_90a
# check on the interpreter, odd shapes, two dtypes, another cap; bad input is exit 2.
expect_rc 0 '"passed": true' tp check softcap --shape T=7,V=1000 --backend cpu --json
expect_rc 0 '"passed": true' tp check softcap --shape T=3,V=33,cap=5 --dtype f32 --json
expect_rc 2 "softcap: unknown key 'W'" tp check softcap --shape T=3,W=4
expect_rc 2 "softcap: config bm=1000 is out of range" tp check softcap --shape T=3,V=4 \
  --config bm=1000,bn=256,threads=128
if "$cli" env 2>/dev/null | grep -q 'sm_90'; then
  expect_rc 0 '"passed": true' tp check softcap --shape T=64,V=32000 --backend cuda --json
  expect_rc 0 '"speedup"' tp bench softcap --shape T=4096,V=32000 --json
else
  expect_rc 2 'GPU|CUDA|driver' tp bench softcap --shape T=64,V=32000 --json
  expect_rc 2 'GPU|CUDA|driver' tp tune softcap --shape T=64,V=32000
fi
# pilot: the CPU pilot passes its correctness stage and decides.
tp pilot "$src/softcap-cpu.yaml" --out "$scratch/pilot" >"$scratch/pilot.log" 2>&1 ||
  fail "pilot failed: $(tail -20 "$scratch/pilot.log")"
grep -q '"decision"' "$scratch/pilot/report.json" || fail "pilot wrote no decision"
grep -q '"operator": "softcap"' "$scratch/pilot/report.json" || fail "report names no softcap"
# A broken kernel (the test-only fault) fails the pilot, leaves a reproducer, and `repro`
# replays the failure.
sed 's/^seed: 7$/seed: 7\ninject_fault: wrong_scale/' "$src/softcap-cpu.yaml" >"$scratch/faulty.yaml"
set +e
tp pilot "$scratch/faulty.yaml" --out "$scratch/faulty" >"$scratch/faulty.log" 2>&1
set -e
[ -d "$scratch/faulty/repro" ] || fail "the faulty pilot left no repro/ folder: $(tail -20 "$scratch/faulty.log")"
expect_rc 1 '' tp repro "$scratch/faulty/repro"
echo "plugin example: every command works for softcap"
