"""CPU test of the shim's NaN injection (tools/cupti/loopgate_pyshim/loopgate_nan.py) on a loop shaped like
Megatron's (fake_megatron/fake_nan_training.py): the fault lands at the iteration, microbatch and bucket its spec
names and nowhere else, with one stderr line each; inf as asked; a spec it refuses is one line and injects nothing;
rank= is the job's RANK, not the node's LOCAL_RANK (a second node's local rank 1 is not rank 1).

    python3 test_nan_shim.py SHIM_DIR

LOOPGATE_WRONG_EXPECTATIONS=1 expects each fault one iteration later, so the test fails."""
import os
import sys

from shim_report import exit_problem, report, run_program

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = """
import math, sys
sys.path.insert(0, {fake!r})
import fake_nan_training
for i, (losses, grads) in enumerate(fake_nan_training.train(5)):
    for mb, v in enumerate(losses):
        if not math.isfinite(v): print("loss", i, mb, v)
    for b, v in enumerate(grads):
        if not math.isfinite(v): print("grad", i, b, v)
"""


def run(shim, spec, extra=None):
    env = dict(os.environ, PYTHONPATH=shim, LOOPGATE_NAN_INJECT=spec, **(extra or {}),
               LOOPGATE_SYNC_ITER_FN="fake_nan_training:train_step",
               LOOPGATE_NAN_LOSS_FN="fake_schedules:forward_step_calc_loss",
               LOOPGATE_NAN_GRAD_FN="fake_buffer:_ParamAndGradBucketGroup.check_grads")
    env.pop("LOOPGATE_SYNC_LIB", None)
    code = PROGRAM.format(fake=os.path.join(HERE, "fake_megatron"))
    return run_program(code, env)


def main():
    shim = sys.argv[1]
    late = 1 if os.environ.get("LOOPGATE_WRONG_EXPECTATIONS") else 0
    cases = [
        ("loss and grad", "iter=2,site=loss,mb=1;iter=3,site=grad,bucket=1",
         [f"loss {2 + late} 1 nan", f"grad {3 + late} 1 nan"],
         ["nan injected into the loss at iteration 2 (microbatch 1)", "nan injected into grad bucket 1 at iteration 3"]),
        ("inf, default microbatch", "iter=0,site=loss,kind=inf", [f"loss {0 + late} 0 inf"],
         ["inf injected into the loss at iteration 0 (microbatch 0)"]),
        ("a bucket the group lacks", "iter=1,site=grad,bucket=5", [],
         ["grad bucket 5 at iteration 1: the group has 2: nothing injected"]),
        ("a spec it refuses", "iter=1,site=optimizer", [], ["is not iter=, site=loss|grad"]),
        ("rank 1 of the job, local rank 0 of its node", "iter=1,site=loss,rank=1", [f"loss {1 + late} 0 nan"],
         ["nan injected into the loss at iteration 1 (microbatch 0)"], {"RANK": "1", "LOCAL_RANK": "0"}),
        ("rank 4 of the job, local rank 1 of its node", "iter=1,site=loss,rank=1", [], [],
         {"RANK": "4", "LOCAL_RANK": "1"}),
    ]
    failures = []
    for name, spec, stdout, stderr, *extra in cases:
        r = run(shim, spec, extra[0] if extra else None)
        if exit_problem(name, r):
            failures.append(exit_problem(name, r))
            continue
        if r.stdout.split("\n")[:-1] != stdout:
            failures.append(f"{name}: stdout {r.stdout.splitlines()}, want {stdout}")
        err = r.stderr.splitlines()
        if len(err) != len(stderr) or any(want not in line for want, line in zip(stderr, err)):
            failures.append(f"{name}: stderr {err}, want lines holding {stderr}")
    return report("nan shim", len(cases), failures)


if __name__ == "__main__":
    sys.exit(main())
