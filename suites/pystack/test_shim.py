"""CPU test of the sync counter's Python shim (tools/cupti/loopgate_pyshim): a program whose module calls
train_step by its global name gets one iteration mark per call, with no edit of its source; the sitecustomize the
shim shadows still runs; a bad LOOPGATE_SYNC_ITER_FN or marker library is one stderr line, and the program runs.

    python3 test_shim.py SHIM_DIR PROBE.so

LOOPGATE_WRONG_EXPECTATIONS=1 expects one mark more, so the test fails."""
import os
import sys

from shim_report import exit_problem, report, run_program

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = """
import builtins, ctypes, sys
sys.path.insert(0, {fake!r})
import fake_training
out = fake_training.train(5)
assert out == [0, 2, 4, 6, 8], out
marks = ctypes.PyDLL({probe!r}).loopgate_probe_marks()
print("marks", marks, "shadowed", getattr(builtins, "LOOPGATE_TEST_SHADOWED_SITECUSTOMIZE_RAN", False))
"""


def run(shim, probe, fn, lib):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([shim, os.path.join(HERE, "shadowed")]),
               LOOPGATE_SYNC_ITER_FN=fn, LOOPGATE_SYNC_LIB=lib)
    code = PROGRAM.format(fake=os.path.join(HERE, "fake_megatron"), probe=probe)
    return run_program(code, env)


def main():
    shim, probe = sys.argv[1], sys.argv[2]
    extra = 1 if os.environ.get("LOOPGATE_WRONG_EXPECTATIONS") else 0
    failures = []
    cases = [
        ("marks each call", "fake_training:train_step", probe, f"marks {5 + extra} shadowed True", ""),
        ("unknown function", "fake_training:no_such_step", probe, f"marks {extra} shadowed True",
         "fake_training has no function 'no_such_step'"),
        ("malformed target", "fake_training.train_step", probe, f"marks {extra} shadowed True",
         "expected module:function"),
        ("no marker library", "fake_training:train_step", "/nonexistent/lib.so", None, "no iteration marker"),
    ]
    for name, fn, lib, stdout, stderr in cases:
        r = run(shim, probe, fn, lib)
        if exit_problem(name, r):
            failures.append(exit_problem(name, r))
            continue
        if stdout is not None and r.stdout.strip() != stdout:
            failures.append(f"{name}: stdout '{r.stdout.strip()}', want '{stdout}'")
        if stderr and stderr not in r.stderr:
            failures.append(f"{name}: stderr '{r.stderr.strip()}' lacks '{stderr}'")
        if not stderr and r.stderr.strip():
            failures.append(f"{name}: unexpected stderr '{r.stderr.strip()}'")
    return report("shim", len(cases), failures)


if __name__ == "__main__":
    sys.exit(main())
