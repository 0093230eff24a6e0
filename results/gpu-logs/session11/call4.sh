#!/usr/bin/env bash
# Session 11, device call 4 (one H200): the final tree builds on the GPU runner's LibTorch, and the issue-24 rows
# pass there: `gate --device cuda --check equivalence,collectives` on single. Logs packed into $OUT/call4.tgz.
source ci/device-steps.sh call4.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
step gate_equivalence_collectives timeout 60 build/gpu/tools/loopgate gate --device cuda --fixture single --check equivalence,collectives
