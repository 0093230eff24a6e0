# Sourced from the repository root by a script the device tool runs (results/gpu-logs/session*/callN.sh):
#   source ci/device-steps.sh TGZ [PATH ...]
# sets the vendor folder for the GPU build, $L = $OUT/logs, and `step NAME CMD ...`: CMD's output goes to
# $L/NAME.log, "NAME rc=RC SECONDS s" to $L/rc.txt and stdout, then after_step runs if the script defined one, and
# the PATHs under $OUT (default: logs) are packed into $OUT/TGZ after every step — only a few files come back from
# $OUT, and a step cut off by the time limit still leaves the ones before it packed.
set -u
export LOOPGATE_VENDOR_DIR=$PWD/.vendor
L=$OUT/logs
mkdir -p "$L"
LG_STEPS_TGZ=$1
shift
LG_STEPS_PACK=("$@")
[ ${#LG_STEPS_PACK[@]} -eq 0 ] && LG_STEPS_PACK=(logs)
step() {
  local name=$1 t0
  shift
  t0=$(date +%s)
  "$@" > "$L/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$L/rc.txt"
  if declare -F after_step > /dev/null; then after_step; fi
  tar czf "$OUT/$LG_STEPS_TGZ" -C "$OUT" "${LG_STEPS_PACK[@]}"
}
