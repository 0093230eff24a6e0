"""CPU test of the sync counter's Python frame walker (tools/cupti/py_stack.h), through a probe library that calls
it as a driver callback would, on the calling thread, with the GIL held (ctypes.PyDLL) and released (ctypes.CDLL,
as torch.cuda.synchronize releases it), from the main thread and from threads that run Python meanwhile.

    python3 test_py_stack.py PROBE.so

Every check compares the named site with the line that made the call. LOOPGATE_WRONG_EXPECTATIONS=1 shifts
every expected line by one, so every check fails (the test can fail)."""
import ctypes
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import probe_helper  # noqa: E402

SHIFT = 1 if os.environ.get("LOOPGATE_WRONG_EXPECTATIONS") else 0
FILE = os.path.abspath(__file__)
failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got '{got}', want '{want}'")


def site(lib, skip=b""):
    buf = ctypes.create_string_buffer(1024)
    lib.loopgate_probe_site(buf, 1024, skip)  # the line every direct check expects
    return buf.value.decode()


SITE_LINE = site.__code__.co_firstlineno + 2


def want(line, function):
    return f"{shorten(FILE)}:{line + SHIFT} {function}"


def shorten(path):
    cwd = os.getcwd() + "/"
    return path[len(cwd):] if path.startswith(cwd) else path


class Model:
    def step(self, lib):
        return site(lib)

    def skip_to_caller(self, lib):
        return probe_helper.site_via_helper(lib, b"probe_helper.py")  # skipped: the site is this line


def gen(lib):
    yield site(lib)


def deep(lib, n):
    return site(lib) if n == 0 else deep(lib, n - 1)


def check_all(lib, tag):
    expect(f"{tag} direct", site(lib), want(SITE_LINE, "site"))
    expect(f"{tag} method (qualname)", Model().step(lib), want(SITE_LINE, "site"))
    line = Model.skip_to_caller.__code__.co_firstlineno + 1
    expect(f"{tag} skipped module", Model().skip_to_caller(lib), want(line, "Model.skip_to_caller"))
    expect(f"{tag} generator", next(gen(lib)), want(SITE_LINE, "site"))
    expect(f"{tag} deep recursion", deep(lib, 200), want(SITE_LINE, "site"))
    # Everything skipped: only this file's frames remain once the probe's own module is skipped too.
    expect(f"{tag} skip this file", site(lib, b"test_py_stack.py,threading.py"), "-" * SHIFT)


def check_reused_code(lib, tag, n=200):
    """Functions made and dropped one after another, each calling the probe at another line: their code objects
    are freed and often reallocated at the same address, so a site cached by address alone would name an old line."""
    fake = os.path.join(os.path.dirname(FILE), "made_by_exec.py")
    for k in range(n):
        namespace = {"lib": lib, "ctypes": ctypes}
        src = "\n" * k + "def made(buf):\n    lib.loopgate_probe_site(buf, 1024, b'')\n    return buf.value.decode()\n"
        exec(compile(src, fake, "exec"), namespace)
        made = namespace.pop("made")  # no cycle through the namespace: the code is freed at the del
        got = made(ctypes.create_string_buffer(1024))
        expect(f"{tag} reused code {k}", got, f"{shorten(fake)}:{k + 2 + SHIFT} made")
        del namespace, made


def main():
    probe = sys.argv[1]
    held, released = ctypes.PyDLL(probe), ctypes.CDLL(probe)
    for lib in (held, released):
        lib.loopgate_probe_site.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    buf = ctypes.create_string_buffer(256)
    if held.loopgate_probe_site(buf, 256, b"") == 0:
        print(f"FAILED: the walker reads no frame: {buf.value.decode()}")
        return 1
    check_all(held, "GIL held")
    check_all(released, "GIL released")
    check_reused_code(held, "GIL held")

    # Threads: each names its own line while the others run Python (and take and drop the GIL) meanwhile.
    stop = threading.Event()

    def busy():
        x = 0
        while not stop.is_set():
            x = sum(range(200)) + x % 7

    def worker(lib, k):
        for _ in range(300):
            check_all(lib, f"thread {k}")

    noise = [threading.Thread(target=busy) for _ in range(2)]
    workers = [threading.Thread(target=worker, args=(held if k % 2 else released, k)) for k in range(4)]
    for t in noise + workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in noise:
        t.join()

    for f in sorted(set(failures))[:20]:
        print("FAILED:", f)
    checks = 12 + 200 + 4 * 300 * 6
    print(f"py_stack: {checks} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
