#!/usr/bin/env bash
# Installs loopgate's CPU build and test dependencies on Debian 12. Idempotent; run as root (or with sudo).
set -euo pipefail
pkgs=(libtorch-dev libopenmpi-dev openmpi-bin libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libcli11-dev libfmt-dev clang lld ccache ninja-build cmake git python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps-cpu: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps-cpu: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
