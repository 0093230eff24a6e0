"""NaN injection for `loopgate pair --nan-inject` into a Python training program (Megatron-LM by default), from
the shim, without editing the program: loopgate's fault spec, poisoned where Megatron validates it.

LOOPGATE_NAN_INJECT   "iter=I,site=loss[,mb=M][,kind=nan|inf];iter=J,site=grad[,bucket=K][,kind=...]": I counts the
                      calls of the iteration function from 0 (Megatron's iteration I + 1); M the loss function's
                      calls within it (default 0); K a bucket of the grad function's object (default 0).
LOOPGATE_NAN_LOSS_FN  "module:function" whose tensor argument is multiplied by the value before the call (out of
                      place, so autograd is unchanged). Default Megatron's
                      megatron.core.pipeline_parallel.schedules:forward_step_calc_loss, whose output_tensor
                      (argument 1) holds the per-token losses its loss_func validates.
LOOPGATE_NAN_LOSS_ARG "POSITION:NAME" of that argument (default 1:output_tensor).
LOOPGATE_NAN_GRAD_FN  "module:Class.method" whose object's buckets[K].grad_data is filled before its first call of
                      the iteration. Default megatron.core.distributed.param_and_grad_buffer:
                      _ParamAndGradBucketGroup.check_grads, where the DDP grad check reads the buckets.
Each injection prints one stderr line; a spec this reader refuses prints one line and injects nothing.
"""
import os

_LOSS_FN = "megatron.core.pipeline_parallel.schedules:forward_step_calc_loss"
_GRAD_FN = "megatron.core.distributed.param_and_grad_buffer:_ParamAndGradBucketGroup.check_grads"


def parse(spec):
    """[{iter, site, mb, bucket, kind}] from loopgate's fault spec; ValueError naming the part it refuses."""
    faults = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        f = {"mb": 0, "bucket": 0, "kind": "nan"}
        for item in part.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"'{item}' is not key=value")
            if key in ("iter", "mb", "bucket"):
                if not value.isdigit():
                    raise ValueError(f"{key}={value}: not a count")
                f[key] = int(value)
            elif key == "site" and value in ("loss", "grad"):
                f["site"] = value
            elif key == "kind" and value in ("nan", "inf"):
                f["kind"] = value
            elif key == "rank":
                f["rank"] = int(value) if value.isdigit() else -1
            else:
                raise ValueError(f"'{item}' is not iter=, site=loss|grad, mb=, bucket=, rank= or kind=nan|inf")
        if "iter" not in f or "site" not in f:
            raise ValueError(f"'{part}' needs iter= and site=")
        faults.append(f)
    return faults


class Injector:
    def __init__(self, faults, say, rank):
        self.faults, self.say, self.rank = faults, say, rank
        self.iteration, self.loss_calls, self.grad_calls = -1, 0, 0

    def due(self, site, **where):
        for f in self.faults:
            if f["site"] == site and f["iter"] == self.iteration and f.get("rank", self.rank) == self.rank and all(
                    f[k] == v for k, v in where.items()):
                return f
        return None

    def on_iteration(self, original):
        def call(*args, **kwargs):
            self.iteration += 1
            self.loss_calls = self.grad_calls = 0
            return original(*args, **kwargs)
        return call

    def on_loss(self, position, name):
        def decorate(original):
            def call(*args, **kwargs):
                f = self.due("loss", mb=self.loss_calls)
                self.loss_calls += 1
                if f is not None:
                    value = float(f["kind"])
                    if len(args) > position:
                        args = args[:position] + (args[position] * value,) + args[position + 1:]
                    elif name in kwargs:
                        kwargs[name] = kwargs[name] * value
                    else:
                        self.say(f"the loss function has no argument {position}:{name}: nothing injected")
                        return original(*args, **kwargs)
                    self.say(f"{f['kind']} injected into the loss at iteration {self.iteration} "
                             f"(microbatch {f['mb']})")
                return original(*args, **kwargs)
            return call
        return decorate

    def on_grad(self, original):
        def call(group, *args, **kwargs):
            f = self.due("grad") if self.grad_calls == 0 else None
            self.grad_calls += 1
            if f is not None:
                buckets = getattr(group, "buckets", [])
                if f["bucket"] < len(buckets):
                    buckets[f["bucket"]].grad_data.fill_(float(f["kind"]))
                    self.say(f"{f['kind']} injected into grad bucket {f['bucket']} at iteration {self.iteration}")
                else:
                    self.say(f"grad bucket {f['bucket']} at iteration {self.iteration}: the group has "
                             f"{len(buckets)}: nothing injected")
            return original(group, *args, **kwargs)
        return call


def install(wrap_on_import, say, iter_fn):
    spec = os.environ.get("LOOPGATE_NAN_INJECT", "")
    try:
        faults = parse(spec)
    except ValueError as e:
        say(f"LOOPGATE_NAN_INJECT '{spec}': {e}: nothing injected")
        return
    position, _, name = os.environ.get("LOOPGATE_NAN_LOSS_ARG", "1:output_tensor").partition(":")
    if not position.isdigit() or not name:
        say(f"LOOPGATE_NAN_LOSS_ARG '{position}:{name}': expected POSITION:NAME: nothing injected")
        return
    rank = int(os.environ.get("RANK", "0") or 0)
    inj = Injector(faults, say, rank)
    wrap_on_import(iter_fn, inj.on_iteration, "no iteration is counted: nothing injected")
    if any(f["site"] == "loss" for f in faults):
        wrap_on_import(os.environ.get("LOOPGATE_NAN_LOSS_FN", _LOSS_FN), inj.on_loss(int(position), name),
                       "no loss is injected")
    if any(f["site"] == "grad" for f in faults):
        wrap_on_import(os.environ.get("LOOPGATE_NAN_GRAD_FN", _GRAD_FN), inj.on_grad, "no grad is injected")
