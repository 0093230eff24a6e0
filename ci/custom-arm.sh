#!/usr/bin/env bash
# The installed package, as a framework engineer uses it (docs/custom-arms.md): installs build/cpu into a
# temporary prefix, configures and builds examples/custom_arm against it (find_package(loopgate CONFIG), no
# add_subdirectory), and runs its CTest tests (my-syncfree accepted on single and tiny2, my-broken rejected by
# the timers gate). Needs a finished `cmake --build --preset cpu`; ci/test-cpu.sh calls it after the main tests.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
prefix=$(mktemp -d /tmp/loopgate-prefix-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/cpu --prefix "$prefix" >/dev/null
installed=$(date +%s)
# The example's own build folder, fresh: its cache must not remember a previous (deleted) prefix.
rm -rf build/custom_arm
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
linker=()
command -v ld.lld >/dev/null && linker=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)
cmake -S examples/custom_arm -B build/custom_arm -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER=clang++ \
      "${launcher[@]}" "${linker[@]}" >/dev/null
cmake --build build/custom_arm
built=$(date +%s)
ctest --test-dir build/custom_arm --output-on-failure -j2
echo "custom-arm: install $((installed - start)) s, example configure + build $((built - installed)) s," \
     "tests $(( $(date +%s) - built )) s"
