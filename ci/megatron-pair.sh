#!/usr/bin/env bash
# `loopgate pair` on real Megatron-LM on one GPU: a checkout as the baseline against each candidate patch of
# fixtures/megatron/ (its README says what each patch does and which row must reject it).
#   bash ci/megatron-pair.sh MEGATRON_CHECKOUT OUT [CANDIDATE...]
# CANDIDATE: a patch's name (good-candidate, bad-reordered-reduction, bad-nan-after-step, bad-sync-in-grad-hook,
# bad-lr-below-print, bad-eps-below-print, bad-timer-accumulates, bad-timer-loses-one, bad-rng-not-restored;
# default: all, in that order),
# or aa: the checkout against itself, $AA_RUNS runs a side (default 4), alternating, which must pass every row with
# a step time neither faster nor slower (an A/A pair on the real program), or aa-noise: the same with a planted
# nondeterministic reduction in both arms (the shim shuffles the order of the grad-norm's tensors on every call,
# LOOPGATE_NOISE_FN), $AA_RUNS runs a side (default 2), which must pass every row too. Each is a copy of the checkout with its patch applied. A pair's verdicts go to OUT/NAME.txt and
# OUT/NAME.{json,html,xml}, its runs to OUT/NAME/. The good candidate runs GOOD_RUNS runs per arm (default 3) and
# the NaN injections GOOD_INJECT (default one into the loss, one into a grad bucket); a bad one runs one per arm
# and what its row needs. Every pair declares the two reads the good candidate adds.
# bad-sync-in-grad-hook's budget is $SYNC_BUDGET, or the good candidate's table when that pair ran first, or else
# the baseline's.
# RESUME_AT=K adds --resume-at K to the good candidate and the A/A pairs (each arm saved at K, loaded, and the
# candidate loading the baseline's checkpoint); bad-rng-not-restored always runs it (K default 10).
# Exit 0 when every pair exited as expected: 0 for the good candidate, 1 with its named row failed for a bad one.
set -euo pipefail
cd "$(dirname "$0")/.."
M=$(realpath "$1") OUT=$(realpath -m "$2")
shift 2
candidates=("$@")
[ ${#candidates[@]} -gt 0 ] || candidates=(good-candidate bad-reordered-reduction bad-nan-after-step bad-sync-in-grad-hook
                                           bad-lr-below-print bad-eps-below-print bad-timer-accumulates bad-timer-loses-one
                                           bad-rng-not-restored)
LG=$(realpath "${LOOPGATE:-build/gpu/tools/loopgate}")
source ci/megatron-env.sh
mkdir -p "$OUT/src"
checkout() {  # checkout NAME [PATCH]: a copy of $M with PATCH applied, its dataset helper compiled
  local dir="$OUT/src/$1"
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$M"/. "$dir"/
  if [ -n "${2:-}" ]; then
    (cd "$dir" && { git apply -p1 "$2" 2>/dev/null || patch -p1 -s --forward < "$2"; }) ||
      { echo "megatron-pair: $2 does not apply to $M"; exit 2; }
  fi
  megatron_helpers "$dir"
}
checkout base
printf '%s\n' "${MEGATRON_ARGS[@]}" > "$OUT/args.txt"
run="python3 pretrain_gpt.py \$(cat $OUT/args.txt)"
noise="LOOPGATE_NOISE_FN=megatron.core.optimizer.clip_grads:get_grad_norm_fp32"
failed=0
for name in "${candidates[@]}"; do
  patch="$PWD/fixtures/megatron/$name.patch"
  [ "$name" = aa ] || [ "$name" = aa-noise ] && patch=
  [ -z "$patch" ] || [ -f "$patch" ] || { echo "megatron-pair: no candidate $name (fixtures/megatron/$name.patch)"; exit 2; }
  checkout "$name" "$patch"
  # The two reads the good candidate adds in place of the ones it removes, declared with their reasons (the bad
  # candidates are built on it, so they add them too: only their own row may fail).
  flags=(--runs 1
         --allow-sync "rerun_state_machine.py RerunStateMachine.drain_banked_verdicts=the banked verdicts' one read"
         --allow-sync "utils.py local_multi_tensor_l2_norm=the per-tensor norms' one batched read")
  expect=1 row= env=
  case $name in
    good-candidate)
      flags[1]=${GOOD_RUNS:-3}
      for spec in ${GOOD_INJECT:-iter=4,site=loss iter=8,site=grad,bucket=0}; do flags+=(--nan-inject "$spec"); done
      expect=0 ;;
    aa)
      flags=(--runs "${AA_RUNS:-4}" --fail-if-slower)
      expect=0 ;;
    aa-noise)
      flags=(--runs "${AA_RUNS:-2}")
      env="$noise " expect=0 ;;
    bad-lr-below-print) row="learning rate" ;;
    bad-eps-below-print) row="parameter digest" ;;
    bad-timer-accumulates | bad-timer-loses-one) row="timer accounting" ;;
    bad-rng-not-restored) flags+=(--resume-at "${RESUME_AT:-10}") row="restart" ;;
    bad-reordered-reduction) row="lm loss, params norm @ 1-2" ;;
    bad-nan-after-step) flags+=(--nan-inject iter=4,site=loss) row="NaN before the step" ;;
    bad-sync-in-grad-hook)
      row="syncs per iteration"
      budget=${SYNC_BUDGET:-$(ls "$OUT"/good-candidate/candidate-1/syncs.*.json 2>/dev/null | head -1 || true)}
      [ -z "$budget" ] || flags+=(--sync-budget "$budget") ;;
  esac
  if [ -n "${RESUME_AT:-}" ] && [ "$name" != bad-rng-not-restored ] && { [ "$expect" = 0 ]; }; then
    flags+=(--resume-at "$RESUME_AT")
  fi
  start=$(date +%s) rc=0
  "$LG" pair "${flags[@]}" --iters 10-15 --early 2 --run-timeout 300 --out-dir "$OUT/$name" \
    --baseline "cd $OUT/src/base && $env$run" --candidate "cd $OUT/src/$name && $env$run" \
    --json "$OUT/$name.json" --html "$OUT/$name.html" --junit "$OUT/$name.xml" > "$OUT/$name.txt" 2>&1 || rc=$?
  verdict="as expected"
  if [ "$rc" != "$expect" ]; then verdict="NOT as expected (exit $expect)" failed=1
  elif [ -n "$row" ] && ! grep -Eq "^$row +FAIL" "$OUT/$name.txt"; then verdict="NOT as expected (row '$row' did not fail)" failed=1
  elif [ "$name" = aa ] && grep -Eq "^step time +[A-Z ]+ +(faster|slower)" "$OUT/$name.txt"; then
    verdict="NOT as expected (an A/A pair called faster or slower)" failed=1
  fi
  echo "megatron-pair: $name: exit $rc in $(( $(date +%s) - start )) s, $verdict${row:+ (row: $row)}"
  sed -n '/^check /,/^checks run/p' "$OUT/$name.txt"
done
exit $failed
