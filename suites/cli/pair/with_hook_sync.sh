#!/usr/bin/env bash
# A candidate for `loopgate pair`'s CPU tests whose table also holds a Python site with its line, as the CUDA
# counter names one in Megatron-LM's grad hook: run_arm.sh, then one sync per iteration added at that site.
# usage: with_hook_sync.sh MPIEXEC LOOPGATE [loopgate run flags...]
set -euo pipefail
"$(dirname "$0")/run_arm.sh" "$@"
python3 - "$LOOPGATE_PAIR_DIR/syncs.1.json" <<'PY'
import json, sys
path = sys.argv[1]
table = json.load(open(path))
table["sites"].append({"site": "megatron/core/distributed/distributed_data_parallel.py:575 hook",
                       "kind": ".item() (scalar D2H + stream sync)",
                       "per_iteration": {str(i): 1 for i in table["iterations"]}})
json.dump(table, open(path, "w"))
PY
