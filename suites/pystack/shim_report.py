"""What the shim tests (test_shim.py, test_nan_shim.py) share: running a case's program and printing the verdict."""
import subprocess
import sys


def run_program(code, env):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def exit_problem(name, r):
    """One line when the case's program failed, else None."""
    return f"{name}: exit {r.returncode}: {r.stderr.strip()[-300:]}" if r.returncode != 0 else None


def report(title, cases, failures):
    for f in failures:
        print("FAILED:", f)
    print(f"{title}: {cases} cases, {len(failures)} failed")
    return 1 if failures else 0
