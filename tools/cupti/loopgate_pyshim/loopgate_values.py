"""Exact values of a Python training run, recorded by loopgate's shim for `loopgate pair` (no edit of the source).

Megatron prints its numbers rounded (lm loss %.6E, grad norm and params norm %.3f, the LR %.6E). The shim takes
them where Megatron has them, before formatting, and writes them as exact hex floats, per rank, to
$LOOPGATE_VALUES_DIR/values.RANK.json at exit ("loopgate-values/1"):

- every call of the log function (Megatron's training_log): its iteration, the loss dict, the LR the scheduler
  computed, loss scale, skipped, grad norm, num zeros, params norm, whether it was the first iteration, and the
  host clock (time.perf_counter) when the call returned: the end of the log point's timer window;
- after every call of the iteration function (train_step) the LR of each of the optimizer's param groups, and
  after steps 1..LOOPGATE_VALUES_DIGEST_ITERS and at exit a digest of the model's parameters and of the
  optimizer's state: blake2b of each tensor's raw bytes, so one bit moved anywhere changes it.

No host sync inside the run: device values (the loss dict holds device tensors) are cloned on the device and read
in one copy at exit. The digests read every tensor at the iterations named, outside the log function; every read of
the shim runs with the sync counter's charging off (loopgate_sync_uncharged in the injection library), so no user
site is charged for it. docs/megatron.md says what this costs.

LOOPGATE_VALUES_DIR          the folder (`loopgate pair` sets it to each run's folder); unset: nothing recorded.
LOOPGATE_VALUES_LOG_FN       "module:function" of the log function (default megatron.training.training:training_log).
LOOPGATE_VALUES_DIGEST_ITERS K: digests after steps 1..K (default 2; 0 = only at exit).
LOOPGATE_NOISE_FN            "module:function" one of whose list arguments is shuffled per run, a reduction in a
LOOPGATE_NOISE_ARG           nondeterministic order planted for the tests (POSITION:NAME, default 0:grads_for_norm).
"""
import atexit
import hashlib
import inspect
import json
import os
import random
import sys
import time

_LOG_FN = "megatron.training.training:training_log"


def _is_tensor(x):
    return hasattr(x, "detach") and hasattr(x, "device")


def _hex(x):
    return None if x is None else float(x).hex()


def _raw_bytes(t):
    """The tensor's (or array's) bytes exactly as stored."""
    if _is_tensor(t):
        import torch
        flat = t.detach().contiguous().reshape(-1)
        return flat.view(torch.uint8).cpu().numpy().tobytes()
    if hasattr(t, "tobytes"):
        return t.tobytes()
    return bytes(t)


def _inner_optimizers(opt):
    """The optimizers that hold parameters and state (Megatron wraps torch's: .optimizer, .chained_optimizers)."""
    if opt is None:
        return []
    if hasattr(opt, "chained_optimizers"):
        return [o for c in opt.chained_optimizers for o in _inner_optimizers(c)]
    if hasattr(opt, "param_groups") and hasattr(opt, "state"):
        return [opt]
    return _inner_optimizers(getattr(opt, "optimizer", None))


def _param_groups(opt):
    return [g for o in _inner_optimizers(opt) for g in o.param_groups]


class Recorder:
    def __init__(self, folder, rank, say, uncharged):
        self.folder, self.rank, self.say, self.uncharged = folder, rank, say, uncharged
        self.digest_iters = int(os.environ.get("LOOPGATE_VALUES_DIGEST_ITERS", "2") or 0)
        self.steps = 0
        self.model = self.optimizer = None
        self.logs = []      # one per log-function call; device values kept as tensors until exit
        self.lrs = {}       # step -> [param group LRs]
        self.digests = []   # {"step", "tensors": [[name, hex digest]]}
        self.written = False

    # ---- the digest ----

    def _tensors(self):
        out = []
        models = self.model if isinstance(self.model, (list, tuple)) else [self.model]
        for i, m in enumerate(models):
            if m is not None and hasattr(m, "named_parameters"):
                out += [(f"model{i}.{name}", p) for name, p in m.named_parameters()]
        for o, opt in enumerate(_inner_optimizers(self.optimizer)):
            for g, group in enumerate(opt.param_groups):
                for k, p in enumerate(group["params"]):
                    out.append((f"optimizer{o}.group{g}.param{k}", p))
                    for key, v in sorted(opt.state.get(p, {}).items()):
                        if _is_tensor(v) or hasattr(v, "tobytes"):
                            out.append((f"optimizer{o}.group{g}.param{k}.{key}", v))
        return out

    def digest(self, step):
        with self.uncharged():
            tensors = [[name, hashlib.blake2b(_raw_bytes(t), digest_size=16).hexdigest()] for name, t in self._tensors()]
        self.digests.append({"step": step, "tensors": tensors})

    # ---- the wrappers ----

    def on_iteration(self, original):
        signature = inspect.signature(original)

        def call(*args, **kwargs):
            try:
                bound = signature.bind_partial(*args, **kwargs).arguments
                self.model = bound.get("model", self.model)
                self.optimizer = bound.get("optimizer", self.optimizer)
            except TypeError:
                pass
            out = original(*args, **kwargs)
            self.steps += 1
            # A group's lr may be a device tensor (a capturable optimizer): kept, read at exit.
            self.lrs[self.steps] = [g["lr"].detach().clone() if _is_tensor(g["lr"]) else g["lr"]
                                    for g in _param_groups(self.optimizer)]
            if self.steps <= self.digest_iters:
                self.digest(self.steps)
            return out
        return call

    def on_log(self, original):
        signature = inspect.signature(original)

        def call(*args, **kwargs):
            out = original(*args, **kwargs)
            clock = time.perf_counter()
            try:
                a = signature.bind(*args, **kwargs)
                a.apply_defaults()
                a = a.arguments
            except TypeError as e:
                self.say(f"the log function's arguments: {e}: this call not recorded")
                return out
            keep = lambda v: v.detach().float().reshape(-1).clone() if _is_tensor(v) else v
            self.logs.append({
                "iteration": a.get("iteration"), "clock": clock, "first": bool(a.get("is_first_iteration", False)),
                "loss": {k: keep(v) for k, v in (a.get("loss_dict") or {}).items()},
                "learning_rate": keep(a.get("learning_rate")), "loss_scale": keep(a.get("loss_scale")),
                "skipped": keep(a.get("skipped_iter")), "grad_norm": keep(a.get("grad_norm")),
                "num_zeros": keep(a.get("num_zeros_in_grad")), "params_norm": keep(a.get("params_norm")),
                "step": self.steps})
            return out
        return call

    # ---- at exit ----

    def _read_device_values(self):
        """Every kept tensor read in one copy per device; Python numbers as they are."""
        with self.uncharged():
            for s, v in self.lrs.items():
                self.lrs[s] = [float(x) if _is_tensor(x) else x for x in v]
        tensors = [(log, key, sub) for log in self.logs for key, sub in self._slots(log) if _is_tensor(self._get(log, key, sub))]
        if not tensors:
            return
        import torch
        with self.uncharged():
            by_device = {}
            for slot in tensors:
                by_device.setdefault(self._get(*slot).device, []).append(slot)
            for slots in by_device.values():
                values = torch.cat([self._get(*s).reshape(-1)[:1].double() for s in slots]).cpu().tolist()
                for s, v in zip(slots, values):
                    self._set(*s, v)

    @staticmethod
    def _slots(log):
        for key in ("learning_rate", "loss_scale", "skipped", "grad_norm", "num_zeros", "params_norm"):
            yield key, None
        for k in log["loss"]:
            yield "loss", k

    @staticmethod
    def _get(log, key, sub):
        return log[key] if sub is None else log[key][sub]

    @staticmethod
    def _set(log, key, sub, v):
        if sub is None:
            log[key] = v
        else:
            log[key][sub] = v

    def write(self):
        if self.written:
            return
        self.written = True
        try:
            if self.steps > 0 and self.steps > self.digest_iters:
                self.digest("end")
            self._read_device_values()
            logs = []
            for log in self.logs:
                e = dict(log)
                e["loss"] = {k: _hex(v) for k, v in log["loss"].items()}
                for key in ("learning_rate", "loss_scale", "grad_norm", "num_zeros", "params_norm"):
                    e[key] = _hex(log[key])
                e["skipped"] = int(log["skipped"] or 0)
                logs.append(e)
            doc = {"format": "loopgate-values/1", "rank": self.rank, "pid": os.getpid(), "clock": "time.perf_counter",
                   "steps": self.steps, "logs": logs,
                   "param_group_lrs": [{"step": s, "lrs": [_hex(x) for x in v]} for s, v in sorted(self.lrs.items())],
                   "digests": self.digests}
            path = os.path.join(self.folder, f"values.{self.rank}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.replace(path + ".tmp", path)
        except Exception as e:  # a failed record must not change how the run ends
            self.say(f"values not written: {type(e).__name__}: {e}")


def _shuffler(position, name, say):
    # Each run its own order, seeded by the run's folder name (`loopgate pair`'s baseline-1, candidate-2, ...) so
    # a test's runs part the same way every time: with a random seed, three runs of a reduction with few distinct
    # sums sometimes all agreed, and the A/A test that needs them to part failed at random. No folder: pid and time.
    folder = os.path.basename(os.path.normpath(os.environ.get("LOOPGATE_VALUES_DIR", "")))
    rng = random.Random(folder) if folder else random.Random(os.getpid() ^ time.time_ns())

    def decorate(original):
        def call(*args, **kwargs):
            if len(args) > position and isinstance(args[position], (list, tuple)):
                v = list(args[position])
                rng.shuffle(v)
                args = args[:position] + (v,) + args[position + 1:]
            elif isinstance(kwargs.get(name), (list, tuple)):
                v = list(kwargs[name])
                rng.shuffle(v)
                kwargs[name] = v
            return original(*args, **kwargs)
        return call
    say(f"noise planted: the order of argument {position}:{name} is shuffled on every call")
    return decorate


def install(wrap_on_import, say, iter_fn, uncharged):
    noise_fn = os.environ.get("LOOPGATE_NOISE_FN", "")
    if noise_fn:
        position, _, name = os.environ.get("LOOPGATE_NOISE_ARG", "0:grads_for_norm").partition(":")
        wrap_on_import(noise_fn, _shuffler(int(position or 0), name, say), "no noise planted")
    folder = os.environ.get("LOOPGATE_VALUES_DIR", "")
    if not folder:
        return
    # RANK is the job's rank; LOCAL_RANK repeats on every node.
    rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")) or 0)
    rec = Recorder(folder, rank, say, uncharged)
    wrap_on_import(iter_fn, rec.on_iteration, "no step is recorded")
    wrap_on_import(os.environ.get("LOOPGATE_VALUES_LOG_FN", _LOG_FN), rec.on_log, "no log value is recorded")
    atexit.register(rec.write)
    sys.modules.setdefault("loopgate_values_recorder", rec)  # tests reach it; the program never does
