#!/usr/bin/env bash
# gpu_select_test.sh SRC_DIR CPU_BUILD_DIR WORK_DIR: what ci/gpu.sh and ci/gpu-gates.sh run on a GPU runner of
# 0, 1, 2 or 8 GPUs, checked on CPU with LOOPGATE_FAKE_GPU_COUNT and the scripts' DRY_RUN=1 (nothing is run on a
# GPU). The CTest side reads the real suites/gpu/CMakeLists.txt through suites/ci/gpu_tree (stub executables) so
# the gpusN labels are the ones a gpu build gets; the fixture side asks the CPU build's loopgate_gates for its
# fixtures' rank counts. Also the GPU count itself: CUDA_VISIBLE_DEVICES and a stand-in nvidia-smi.
# Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expectation, so every check here fails.
set -u
SRC=$1 BIN=$2 WORK=$3
w=0
[ -n "${LOOPGATE_WRONG_EXPECTATIONS:-}" ] && w=1
rm -rf "$WORK" && mkdir -p "$WORK/bin" "$WORK/results"
unset LOOPGATE_FAKE_GPU_COUNT CUDA_VISIBLE_DEVICES GATES_FIXTURES LOOP_FIXTURES GATES_FILTER
# A stand-in nvidia-smi first on PATH, so a real one (or none) on this machine does not change the answers.
cat >"$WORK/bin/nvidia-smi" <<'EOF'
#!/bin/sh
printf '%b' "${FAKE_SMI_OUTPUT:-}"
EOF
chmod +x "$WORK/bin/nvidia-smi"
export PATH="$WORK/bin:$PATH"

failed=0 checks=0
check() {  # check NAME GOT WANT
  checks=$((checks + 1))
  if [ "$2" = "$3" ]; then
    echo "ok   $1"
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n  got:  %s\n  want: %s\n' "$1" "$2" "$3"
  fi
}
plus() { echo $(($1 + w)); }

# ---- the GPU count ----
count() { bash "$SRC/ci/gpu-select.sh" count 2>&1; }
smi2='GPU 0: NVIDIA H200 (UUID: GPU-a)\n  MIG 3g.71gb Device 0: (UUID: MIG-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n  MIG 3g.71gb Device 0: (UUID: MIG-b)\n'
check "nvidia-smi -L: GPU lines counted, MIG lines not" "$(FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 2)"
check "no nvidia-smi output: 0" "$(FAKE_SMI_OUTPUT= count)" "$(plus 0)"
check "CUDA_VISIBLE_DEVICES=0" "$(CUDA_VISIBLE_DEVICES=0 FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 1)"
check "CUDA_VISIBLE_DEVICES='' hides every GPU" "$(CUDA_VISIBLE_DEVICES= FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 0)"
check "CUDA_VISIBLE_DEVICES=1,-1,0 stops at -1" "$(CUDA_VISIBLE_DEVICES=1,-1,0 FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 1)"
check "CUDA_VISIBLE_DEVICES of UUIDs" "$(CUDA_VISIBLE_DEVICES=GPU-a,GPU-b FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 2)"
check "CUDA_VISIBLE_DEVICES=0,1,2,3 on 2 GPUs: 2" "$(CUDA_VISIBLE_DEVICES=0,1,2,3 FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 2)"
check "LOOPGATE_FAKE_GPU_COUNT wins" "$(LOOPGATE_FAKE_GPU_COUNT=3 CUDA_VISIBLE_DEVICES=0 FAKE_SMI_OUTPUT=$smi2 count)" "$(plus 3)"
out=$(LOOPGATE_FAKE_GPU_COUNT=two bash "$SRC/ci/gpu-select.sh" count 2>&1); rc=$?
check "LOOPGATE_FAKE_GPU_COUNT=two refused" "$rc: $out" "$(plus 2): gpu-select: LOOPGATE_FAKE_GPU_COUNT='two' is not a count"

# ---- ci/gpu.sh: the CTest selection on the real GPU test registrations ----
cmake -S "$SRC/suites/ci/gpu_tree" -B "$WORK/gpu_tree" -DLOOPGATE_SOURCE_DIR="$SRC" >"$WORK/gpu_tree.log" 2>&1 ||
  { cat "$WORK/gpu_tree.log"; exit 1; }
names() { ctest --test-dir "$WORK/gpu_tree" -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p' | sort | tr '\n' ' '; }
one_gpu="gpu_comm_nccl_np1 gpu_cupti_counter gpu_digests gpu_loop_CaptureProbe_single gpu_loop_LedgerEqualsCupti_single gpu_single_syncs "
two_gpus="gpu_comm_nccl_np2 gpu_loop_CaptureProbe_pp2 gpu_loop_CaptureProbe_tp2sp gpu_loop_LedgerEqualsCupti_pp2 gpu_loop_LedgerEqualsCupti_tp2sp gpu_nccl_smoke_np2 "
[ $w = 1 ] && one_gpu+="planted " && two_gpus+="planted "
check "label gpus1: the one-rank GPU tests" "$(names -L '^gpus1$')" "$one_gpu"
check "label gpus2: the two-rank GPU tests" "$(names -L '^gpus2$')" "$two_gpus"
check "every gpu test has one gpusN label" "$(names -L '^gpu$' -LE '^gpus[0-9]+$')$(ctest --test-dir "$WORK/gpu_tree" -N -L '^gpu$' | sed -n 's/^Total Tests: //p')" "$(plus 12)"

gpu_sh() { DRY_RUN=1 BUILD_DIR="$WORK/gpu_tree" bash "$SRC/ci/gpu.sh" 2>&1; }
out=$(LOOPGATE_FAKE_GPU_COUNT=1 gpu_sh); rc=$?
check "gpu.sh, 1 GPU: exit code" "$rc" "$(plus 0)"
check "gpu.sh, 1 GPU: the left-out line" "$(grep '^left out' <<<"$out")" "left out: $(plus 6) tests need 2 GPUs, this runner has 1"
check "gpu.sh, 1 GPU: the filter" "$(grep -o -- '-L gpu -LE [^ ]* --resource-spec-file [^ ]* -j [0-9]*' <<<"$out")" \
  "-L gpu -LE ^(gpus2)\$ --resource-spec-file $WORK/gpu_tree/gpu-resources.json -j $(plus 1)"
check "gpu.sh, 1 GPU: tests it runs" "$(sed -n 's/^ *Test *#[0-9]*: //p' <<<"$out" | sort | tr '\n' ' ')" "$one_gpu"
check "gpu.sh, 1 GPU: resource spec" "$(cat "$WORK/gpu_tree/gpu-resources.json")" \
  "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [{\"id\": \"$w\", \"slots\": 1}]}]}"
out=$(LOOPGATE_FAKE_GPU_COUNT=2 gpu_sh); rc=$?
check "gpu.sh, 2 GPUs: nothing left out, every test, ci/gpu-resources.json" \
  "$rc $(grep -c '^left out' <<<"$out") $(grep -c -- '-LE' <<<"$out") $(grep -c "resource-spec-file $SRC/ci/gpu-resources.json -j 2 " <<<"$out") $(sed -n 's/^Total Tests: //p' <<<"$out")" \
  "0 0 0 1 $(plus 12)"
out=$(LOOPGATE_FAKE_GPU_COUNT=8 gpu_sh); rc=$?
check "gpu.sh, 8 GPUs: nothing left out, every test, a spec of 8" \
  "$rc $(grep -c '^left out' <<<"$out") $(sed -n 's/^Total Tests: //p' <<<"$out") $(grep -o '"id"' "$WORK/gpu_tree/gpu-resources.json" | wc -l)" \
  "0 0 12 $(plus 8)"
out=$(LOOPGATE_FAKE_GPU_COUNT=0 gpu_sh); rc=$?
check "gpu.sh, 0 GPUs: a failure, not an empty pass" "$rc $(grep -c 'gpu.sh: no GPU visible' <<<"$out")" "$(plus 1) 1"

# ---- ci/gpu-gates.sh: fixtures that fit, one GPU per rank (rank counts from loopgate_gates --lg_describe=json) ----
gates_sh() { DRY_RUN=1 BUILD_DIR="$BIN" RESULTS="$WORK/results" bash "$SRC/ci/gpu-gates.sh" 2>&1; }
launches() {  # "fixture:np:limit" per launch line, gate suites then gpu_loop
  sed -n 's/^would run: timeout \([0-9]*\) mpirun -np \([0-9]*\) [^ ]*\/\(loopgate_gates\|loopgate_gpu_loop\) --lg_fixture=\([a-z0-9_]*\).*/\3 \4:\2:\1/p' <<<"$1" |
    tr '\n' ' '
}
out=$(LOOPGATE_FAKE_GPU_COUNT=1 gates_sh); rc=$?
check "gpu-gates.sh, 1 GPU: left-out lines" "$(grep '^left out' <<<"$out" | tr '\n' '|')" \
  "left out: fixture tp2sp needs $(plus 2) GPUs (one per rank), this runner has 1|left out: fixture pp2 needs 2 GPUs (one per rank), this runner has 1|left out: fixture dp64 needs 64 GPUs (one per rank), this runner has 1|left out: fixture pp2tp2dp2 needs 8 GPUs (one per rank), this runner has 1|"
check "gpu-gates.sh, 1 GPU: launches" "$rc $(launches "$out")" \
  "0 loopgate_gates single:1:400 loopgate_gpu_loop single:1:400 loopgate_gpu_loop single:$(plus 1):400 "
out=$(LOOPGATE_FAKE_GPU_COUNT=2 gates_sh); rc=$?
check "gpu-gates.sh, 2 GPUs: left-out lines" "$(grep '^left out' <<<"$out" | sed 's/ (one per rank), this runner has 2//' | tr '\n' '|')" \
  "left out: fixture dp64 needs 64 GPUs|left out: fixture pp2tp2dp2 needs $(plus 8) GPUs|"
check "gpu-gates.sh, 2 GPUs: launches" "$rc $(launches "$out")" \
  "0 loopgate_gates single:1:400 loopgate_gates tp2sp:2:400 loopgate_gates pp2:$(plus 2):400 loopgate_gpu_loop single:1:400 loopgate_gpu_loop single:1:400 loopgate_gpu_loop tp2sp:2:400 loopgate_gpu_loop tp2sp:2:400 loopgate_gpu_loop pp2:2:400 loopgate_gpu_loop pp2:2:400 "
out=$(LOOPGATE_FAKE_GPU_COUNT=8 GATES_FIXTURES=pp2tp2dp2,dp64 LOOP_FIXTURES=none gates_sh); rc=$?
check "gpu-gates.sh, 8 GPUs, GATES_FIXTURES=pp2tp2dp2,dp64: pp2tp2dp2 on 8 ranks, dp64 left out" \
  "$rc $(launches "$out")| $(grep '^left out' <<<"$out")" \
  "0 loopgate_gates pp2tp2dp2:$(plus 8):1200 | left out: fixture dp64 needs 64 GPUs (one per rank), this runner has 8"
out=$(LOOPGATE_FAKE_GPU_COUNT=1 GATES_FIXTURES=tp2sp LOOP_FIXTURES=none gates_sh); rc=$?
check "gpu-gates.sh, 1 GPU, only tp2sp asked for: a failure, not an empty pass" \
  "$rc $(grep -c 'none of the fixtures asked for (tp2sp) fits 1 GPU' <<<"$out") $(launches "$out")" "$(plus 1) 1 "
out=$(LOOPGATE_FAKE_GPU_COUNT=2 GATES_FIXTURES=tp2sq gates_sh); rc=$?
check "gpu-gates.sh: an unknown fixture is bad input" "$rc $(grep -c "unknown fixture 'tp2sq'" <<<"$out")" "$(plus 2) 1"
out=$(LOOPGATE_FAKE_GPU_COUNT=0 gates_sh); rc=$?
check "gpu-gates.sh, 0 GPUs: a failure" "$rc $(grep -c 'gpu-gates: no GPU visible' <<<"$out")" "$(plus 1) 1"

echo "gpu_select_test: $((checks - failed)) of $checks checks passed"
[ "$failed" = 0 ]
