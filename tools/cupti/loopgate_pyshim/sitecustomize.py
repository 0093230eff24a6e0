"""loopgate's Python shim for the sync counter (`loopgate syncs`): each call of one named function begins an
iteration, without editing the user's source. Python imports this file at start-up because `loopgate syncs` puts
its folder first on PYTHONPATH; it then runs the sitecustomize it shadows, if there is one.

LOOPGATE_SYNC_ITER_FN  "module:function" (default megatron.training.training:train_step): the function wrapped
                       once the module is imported; its module's globals see the wrapper, so callers inside the
                       module (Megatron's train loop) call it.
LOOPGATE_SYNC_LIB      the library that exports loopgate_sync_iteration() (the injection library).
"""
import ctypes
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = os.environ.get("LOOPGATE_SYNC_ITER_FN", "megatron.training.training:train_step")


def _marker():
    lib = os.environ.get("LOOPGATE_SYNC_LIB", "")
    try:
        # PyDLL keeps the GIL across the call: the marker only bumps an atomic counter.
        return ctypes.PyDLL(lib).loopgate_sync_iteration
    except (OSError, AttributeError) as e:
        print(f"loopgate shim: no iteration marker in LOOPGATE_SYNC_LIB '{lib}': {e}", file=sys.stderr)
        return None


def _wrap(module, function, mark):
    original = getattr(module, function, None)
    if original is None:
        print(f"loopgate shim: {module.__name__} has no function '{function}': no iteration is marked",
              file=sys.stderr)
        return

    @functools.wraps(original)
    def marked(*args, **kwargs):
        mark()
        return original(*args, **kwargs)

    setattr(module, function, marked)


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds the target module with the other finders, then wraps the function once the module has run."""

    def __init__(self, module, function, mark):
        self.module, self.function, self.mark = module, function, mark

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        run = spec.loader.exec_module
        function, mark = self.function, self.mark

        def exec_module(module):
            run(module)
            _wrap(module, function, mark)

        spec.loader.exec_module = exec_module
        sys.meta_path.remove(self)  # one module, once
        return spec


def _install():
    module, sep, function = _TARGET.partition(":")
    if not sep or not module or not function:
        print(f"loopgate shim: LOOPGATE_SYNC_ITER_FN '{_TARGET}': expected module:function", file=sys.stderr)
        return
    mark = _marker()
    if mark is None:
        return
    if module in sys.modules:
        _wrap(sys.modules[module], function, mark)
    else:
        sys.meta_path.insert(0, _WrapOnImport(module, function, mark))


def _run_shadowed_sitecustomize():
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_install()
_run_shadowed_sitecustomize()
