#!/usr/bin/env bash
# Installs loopgate's CPU build and test dependencies on Debian 12. Idempotent; run as root (or with sudo).
set -euo pipefail
# chromium: the report_browser test renders `loopgate report`'s page headless (~122 MB download, ~410 MB disk).
# libbenchmark-tools, python3-numpy, python3-scipy: Google Benchmark's compare.py (ci/bench-compare.sh).
pkgs=(libtorch-dev libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev libbenchmark-tools
      python3-numpy python3-scipy nlohmann-json3-dev libcli11-dev libfmt-dev clang lld ccache ninja-build cmake git
      python3 python3-dev libopenblas0-serial chromium
      libclang-rt-14-dev)  # libclang-rt: libFuzzer and the sanitizer runtimes (ci/fuzz.sh, preset cpu-asan)
# fp32 matmul goes through the libblas.so.3 alternative: single-threaded OpenBLAS (6x the reference BLAS's
# sgemm; the golden values were made with it, golden/*/environment_cpu.json "blas").
blas_alt=libblas.so.3-x86_64-linux-gnu
openblas=/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3
select_openblas() {
  if [ "$(update-alternatives --query "$blas_alt" 2>/dev/null | sed -n 's/^Value: //p')" != "$openblas" ]; then
    echo "deps-cpu: libblas.so.3 -> $openblas"
    $SUDO update-alternatives --set "$blas_alt" "$openblas"
  fi
}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps-cpu: all ${#pkgs[@]} packages present"
  select_openblas
  exit 0
fi
echo "deps-cpu: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
select_openblas
