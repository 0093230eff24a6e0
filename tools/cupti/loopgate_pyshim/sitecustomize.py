"""loopgate's Python shim (`loopgate syncs`, `loopgate pair`): it wraps named functions of the user's program when
their modules are imported, without editing the source. Python imports this file at start-up because loopgate puts
its folder first on PYTHONPATH; it then runs the sitecustomize it shadows, if there is one.

LOOPGATE_SYNC_ITER_FN  "module:function" (default megatron.training.training:train_step): each call begins an
                       iteration. The function is replaced in its module, so callers inside the module (Megatron's
                       train loop) call the wrapper.
LOOPGATE_SYNC_LIB      the library that exports loopgate_sync_iteration() (the injection library); unset: no marks.
LOOPGATE_NAN_INJECT    faults to inject (loopgate_nan.py says which functions and how): `loopgate pair --nan-inject`.
LOOPGATE_VALUES_DIR    record the run's exact values there (loopgate_values.py): `loopgate pair` sets it.
LOOPGATE_NOISE_FN      plant a reduction in a nondeterministic order (loopgate_values.py): the tests' A/A pairs.
"""
import contextlib
import ctypes
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ITER_FN = os.environ.get("LOOPGATE_SYNC_ITER_FN", "megatron.training.training:train_step")


def _say(line):
    print(f"loopgate shim: {line}", file=sys.stderr, flush=True)


def _marker():
    lib = os.environ.get("LOOPGATE_SYNC_LIB", "")
    try:
        # PyDLL keeps the GIL across the call: the marker only bumps an atomic counter.
        return ctypes.PyDLL(lib).loopgate_sync_iteration
    except (OSError, AttributeError) as e:
        _say(f"no iteration marker in LOOPGATE_SYNC_LIB '{lib}': {e}")
        return None


# ---- wrapping a function when its module is imported ----

_PENDING = {}  # module name -> [(qualified name, decorate, what is lost without it)]


def _apply(module, qualname, decorate, lost):
    owner = module
    parts = qualname.split(".")
    for part in parts[:-1]:  # Class.method
        owner = getattr(owner, part, None)
    original = getattr(owner, parts[-1], None) if owner is not None else None
    if original is None:
        _say(f"{module.__name__} has no function '{qualname}': {lost}")
        return
    setattr(owner, parts[-1], functools.wraps(original)(decorate(original)))


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds a pending module with the other finders, then applies its wraps once the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name not in _PENDING:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        run, wraps = spec.loader.exec_module, _PENDING.pop(name)  # one module, once

        def exec_module(module):
            run(module)
            for qualname, decorate, lost in wraps:
                _apply(module, qualname, decorate, lost)

        spec.loader.exec_module = exec_module
        return spec


_FINDER = _WrapOnImport()


def wrap_on_import(target, decorate, lost):
    """Replaces `module:qualname` by decorate(original) once the module is imported (now, if it is)."""
    module, sep, qualname = target.partition(":")
    if not sep or not module or not qualname:
        _say(f"'{target}': expected module:function: {lost}")
        return
    if module in sys.modules:
        _apply(sys.modules[module], qualname, decorate, lost)
        return
    _PENDING.setdefault(module, []).append((qualname, decorate, lost))
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _uncharged_switch():
    """A context in which the sync counter charges nothing to the calling thread (the shim's own reads)."""
    lib = os.environ.get("LOOPGATE_SYNC_LIB", "")
    try:
        switch = ctypes.PyDLL(lib).loopgate_sync_uncharged if lib else None
    except (OSError, AttributeError) as e:
        _say(f"no loopgate_sync_uncharged in LOOPGATE_SYNC_LIB '{lib}': {e}: the shim's reads are charged")
        switch = None

    @contextlib.contextmanager
    def uncharged():
        if switch is not None:
            switch(1)
        try:
            yield
        finally:
            if switch is not None:
                switch(0)
    return uncharged


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # only when asked
    return module


# ---- what loopgate asked for ----

def _install():
    if os.environ.get("LOOPGATE_SYNC_LIB"):
        mark = _marker()
        if mark is not None:
            def marked(original):
                def call(*args, **kwargs):
                    mark()
                    return original(*args, **kwargs)
                return call
            wrap_on_import(_ITER_FN, marked, "no iteration is marked")
    if os.environ.get("LOOPGATE_NAN_INJECT"):
        _load("loopgate_nan").install(wrap_on_import, _say, _ITER_FN)
    if os.environ.get("LOOPGATE_VALUES_DIR") or os.environ.get("LOOPGATE_NOISE_FN"):
        _load("loopgate_values").install(wrap_on_import, _say, _ITER_FN, _uncharged_switch())


def _run_shadowed_sitecustomize():
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_install()
_run_shadowed_sitecustomize()
