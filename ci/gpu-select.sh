#!/usr/bin/env bash
# What a GPU runner of any size runs: its GPU count, the CTest filter that leaves out the tests needing more GPUs
# than that (label gpusN, set by loopgate_add_mpi_test from RESOURCE_GROUPS: ctest/LoopgateMpi.cmake), and the
# fixtures whose rank count fits (one GPU per rank). Each left-out group gets one "left out: ..." line.
# Sourced by ci/gpu.sh and ci/gpu-gates.sh; the CPU test suites/ci/gpu_select_test.sh drives the same functions
# with LOOPGATE_FAKE_GPU_COUNT. Not here: building or running anything.
#
# The GPU count, first that applies: LOOPGATE_FAKE_GPU_COUNT (tests; a dry run of a bigger runner);
# CUDA_VISIBLE_DEVICES when set (its entries up to the first invalid one, as CUDA counts them; at most what
# `nvidia-smi -L` lists when nvidia-smi is there); else the "GPU n:" lines of `nvidia-smi -L` (MIG lines not counted).

# Prints the number of GPUs CUDA programs on this runner see. Returns 2 on a malformed LOOPGATE_FAKE_GPU_COUNT.
lg_gpu_count() {
  if [ -n "${LOOPGATE_FAKE_GPU_COUNT:-}" ]; then
    if ! [[ $LOOPGATE_FAKE_GPU_COUNT =~ ^[0-9]+$ ]]; then
      echo "gpu-select: LOOPGATE_FAKE_GPU_COUNT='$LOOPGATE_FAKE_GPU_COUNT' is not a count" >&2
      return 2
    fi
    echo "$((10#$LOOPGATE_FAKE_GPU_COUNT))"
    return 0
  fi
  local physical=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    physical=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]') || true
  fi
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    local n=0 id ids=()
    IFS=, read -ra ids <<<"$CUDA_VISIBLE_DEVICES"
    for id in "${ids[@]}"; do
      id=${id// /}
      [[ $id =~ ^[0-9]+$ || $id =~ ^(GPU|MIG)- ]] || break  # CUDA stops at the first invalid entry ("-1", "")
      n=$((n + 1))
    done
    if [ -n "$physical" ] && [ "$n" -gt "$physical" ]; then n=$physical; fi
    echo "$n"
    return 0
  fi
  echo "${physical:-0}"
}

# "1 test needs 2 GPUs" / "6 tests need 2 GPUs" / "... 1 GPU".
lg_need_text() {
  local k=$1 n=$2
  local tests="tests need" gpus="GPUs"
  [ "$k" = 1 ] && tests="test needs"
  [ "$n" = 1 ] && gpus="GPU"
  echo "$k $tests $n $gpus"
}

# lg_ctest_gpu_filter BUILD_DIR NGPU: one "left out:" line per GPU count above NGPU that some gpu test needs;
# sets LG_CTEST_FILTER to the ctest arguments that leave those tests out (empty, or -LE '^(gpus2|gpus8)$').
lg_ctest_gpu_filter() {
  local dir=$1 ngpu=$2 label n k
  local out=()
  LG_CTEST_FILTER=()
  local labels
  labels=$(ctest --test-dir "$dir" --print-labels | sed -n 's/^ *\(gpus[0-9][0-9]*\) *$/\1/p' | sort -V) || return 1
  for label in $labels; do
    n=${label#gpus}
    [ "$n" -gt "$ngpu" ] || continue
    k=$(ctest --test-dir "$dir" -N -L '^gpu$' -L "^$label\$" | sed -n 's/^Total Tests: //p')
    echo "left out: $(lg_need_text "$k" "$n"), this runner has $ngpu"
    out+=("$label")
  done
  if [ ${#out[@]} -gt 0 ]; then
    local IFS='|'
    LG_CTEST_FILTER=(-LE "^(${out[*]})\$")
  fi
}

# lg_fixture_ranks SUITES_EXE: "name:ranks" of every fixture the gate suites executable knows (--lg_describe=json).
lg_fixture_ranks() {
  "$1" --lg_describe=json | python3 -c '
import json, sys
print(" ".join("%s:%d" % (f["name"], f["world"]) for f in json.load(sys.stdin)["fixtures"]))'
}

# lg_fixtures_that_fit NGPU "name:ranks ..." [WANTED]: keeps the fixtures (all, or the names in WANTED, a space-
# or comma-separated list, in its order) whose ranks fit NGPU GPUs, one GPU per rank; one "left out:" line for each other. Sets LG_FIXTURES
# ("name:ranks ..."). Returns 2 when WANTED names a fixture the list lacks.
lg_fixtures_that_fit() {
  local ngpu=$1 known=$2 wanted=${3:-} name entry np found
  LG_FIXTURES=""
  wanted=${wanted//,/ }
  [ -n "$wanted" ] || wanted=$(for entry in $known; do printf '%s ' "${entry%%:*}"; done)
  for name in $wanted; do
    found=""
    for entry in $known; do
      [ "${entry%%:*}" = "$name" ] && found=$entry
    done
    if [ -z "$found" ]; then
      echo "gpu-select: unknown fixture '$name' (known: $known)" >&2
      return 2
    fi
    np=${found##*:}
    if [ "$np" -gt "$ngpu" ]; then
      echo "left out: fixture $name needs $np GPUs (one per rank), this runner has $ngpu"
    else
      LG_FIXTURES+="${LG_FIXTURES:+ }$found"
    fi
  done
}

# As a command (the CPU test, or a person checking a runner): bash ci/gpu-select.sh count |
#   ctest-filter BUILD_DIR | fixtures SUITES_EXE [NAMES...]
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    count) lg_gpu_count ;;
    ctest-filter)
      ngpu=$(lg_gpu_count)
      lg_ctest_gpu_filter "$2" "$ngpu"
      echo "ctest filter: ${LG_CTEST_FILTER[*]:-(none)}"
      ;;
    fixtures)
      ngpu=$(lg_gpu_count)
      known=$(lg_fixture_ranks "$2")
      shift 2
      lg_fixtures_that_fit "$ngpu" "$known" "$*"
      echo "fixtures: ${LG_FIXTURES:-(none)}"
      ;;
    *) echo "usage: bash ci/gpu-select.sh count | ctest-filter BUILD_DIR | fixtures SUITES_EXE [NAMES...]" >&2; exit 2 ;;
  esac
fi
