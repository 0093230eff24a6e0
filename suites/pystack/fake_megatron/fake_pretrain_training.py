"""Shaped like megatron/training/training.py for fake_pretrain.py: train() calls train_step and training_log by
their global names with Megatron's argument names; the model's parameters are fp32 arrays behind
named_parameters(); the optimizer wraps an inner one with param_groups and state (Adam's exp_avg, exp_avg_sq), as
Megatron's wraps torch's; the interval timer is reset at each log point except the first, as Megatron's is.

The defects (--defect), each a change a careless engineer could make, each for the row named:
  lr-rewrite       the LR schedule rewritten algebraically: last bits differ, the printed %.6E not (learning rate)
  update-rounded   Adam's update rounded to fp32 before it is applied: the params move in their low bits
                   (lm loss / params norm, the digest)
  timer-accumulates  the interval timer never reset: each line reports the running total (timer accounting)
  timer-loses-one  the timer stopped around iteration 6's step: that interval is lost (timer accounting)
  step-not-restored  a load restores the parameters, moments and scheduler but not Adam's step count: the bias
                   correction restarts (restart)
--save/--save-interval/--exit-interval/--load as Megatron's: a checkpoint (JSON, the fp32 bits as hex) every
save interval, the run ends after the exit interval's iteration, and a load continues from the newest one.
"""
import datetime
import json
import math
import os
import random
import struct
import time
from array import array

import fake_clip_grads

DEFECTS = ["none", "lr-rewrite", "update-rounded", "timer-accumulates", "timer-loses-one", "step-not-restored"]
ARGS = None


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class Param:
    """An fp32 tensor: hashable by identity, as torch's are (the optimizer's state is keyed by it)."""

    def __init__(self, values):
        self.data = array("f", values)

    def tobytes(self):
        return self.data.tobytes()


class Model:
    def __init__(self, seed):
        rng = random.Random(seed)
        self.params = {f"layers.{i}.weight": Param(rng.uniform(-1, 1) for _ in range(8)) for i in range(8)}

    def named_parameters(self):
        return list(self.params.items())


class Adam:
    def __init__(self, params, lr):
        self.param_groups = [{"params": params, "lr": lr}]
        self.state = {p: {"exp_avg": Param([0.0] * 8), "exp_avg_sq": Param([0.0] * 8)} for p in params}
        self.steps = 0

    def step(self, grads, rounded_update):
        self.steps += 1
        b1, b2, eps = 0.9, 0.95, 1e-8
        lr = self.param_groups[0]["lr"]
        for p, g in zip(self.param_groups[0]["params"], grads):
            m, v = self.state[p]["exp_avg"].data, self.state[p]["exp_avg_sq"].data
            for j in range(len(g)):
                m[j] = b1 * m[j] + (1 - b1) * g[j]
                v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j]
                mhat, vhat = m[j] / (1 - b1 ** self.steps), v[j] / (1 - b2 ** self.steps)
                update = lr * mhat / (math.sqrt(vhat) + eps)
                p.data[j] = p.data[j] - (f32(update) if rounded_update else update)


class Optimizer:
    """Megatron's wrapper: the inner optimizer holds the parameters and the state."""

    def __init__(self, model, lr):
        self.optimizer = Adam([p for _, p in model.named_parameters()], lr)


class Scheduler:
    def __init__(self, max_lr, min_lr, warmup, decay):
        self.max_lr, self.min_lr, self.warmup, self.decay, self.num_steps = max_lr, min_lr, warmup, decay, 0

    def get_lr(self):
        n = self.num_steps
        if ARGS.defect == "lr-rewrite":  # the same formulas, reassociated
            if n <= self.warmup:
                return n * self.max_lr / self.warmup
            r = (n - self.warmup) / (self.decay - self.warmup)
            return (self.max_lr + self.min_lr) / 2 + (self.max_lr - self.min_lr) / 2 * math.cos(math.pi * r)
        if n <= self.warmup:
            return self.max_lr * n / self.warmup
        r = (n - self.warmup) / (self.decay - self.warmup)
        return self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (math.cos(math.pi * r) + 1.0)

    def step(self, optimizer):
        self.num_steps += 1
        for g in optimizer.optimizer.param_groups:
            g["lr"] = self.get_lr()


class IntervalTimer:
    def __init__(self):
        self.start_time, self.total, self.running = time.perf_counter(), 0.0, True

    def stop(self):
        self.total += time.perf_counter() - self.start_time
        self.running = False

    def start(self):
        self.start_time, self.running = time.perf_counter(), True

    def elapsed(self, reset):
        if self.running:
            self.stop()
        out = self.total
        if reset and ARGS.defect != "timer-accumulates":
            self.total = 0.0
        self.start()
        return out


TIMER = None


def data(iteration):
    rng = random.Random(1000 + iteration)
    return [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(8)]


def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
               forward_backward_func, iteration=None):
    target = data_iterator(iteration)
    params = [p for _, p in model.named_parameters()]
    n = sum(len(p.data) for p in params)
    loss = f32(sum(f32((p.data[j] - t[j]) ** 2) for p, t in zip(params, target) for j in range(8)) / n)
    grads = [[f32(2 * (p.data[j] - t[j]) / n) for j in range(8)] for p, t in zip(params, target)]
    grad_norm = fake_clip_grads.get_grad_norm_fp32(grads)
    if grad_norm > 0.05:  # clipping: the grad norm's last bits reach the parameters
        coeff = 0.05 / (grad_norm + 1e-6)
        grads = [[f32(v * coeff) for v in g] for g in grads]
    num_zeros = sum(1 for g in grads for v in g if v == 0.0)
    time.sleep(ARGS.step_ms / 1000.0)  # the step's device time
    optimizer.optimizer.step(grads, ARGS.defect == "update-rounded")
    opt_param_scheduler.step(optimizer)
    return {"lm loss": loss}, 0, grad_norm, num_zeros


def training_log(loss_dict, total_loss_dict, learning_rate, iteration, loss_scale, report_memory_flag, skipped_iter,
                 grad_norm, params_norm, num_zeros_in_grad, max_attention_logit, pg_collection=None,
                 is_first_iteration=False):
    for k in ("advanced iterations", "skipped iterations", "nan iterations"):
        total_loss_dict.setdefault(k, 0)
    total_loss_dict["advanced iterations"] += 0 if skipped_iter else 1
    total_loss_dict["skipped iterations"] += skipped_iter
    for key, v in loss_dict.items():
        total_loss_dict[key] = f32(total_loss_dict.get(key, 0.0) + v)
    if not (iteration % ARGS.log_interval == 0 or is_first_iteration):
        return
    should_reset = not is_first_iteration
    total_iterations = total_loss_dict["advanced iterations"] + total_loss_dict["skipped iterations"]
    elapsed_per_iteration = TIMER.elapsed(should_reset) / total_iterations
    line = f" [{datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    line += " iteration {:8d}/{:8d} |".format(iteration, ARGS.train_iters)
    line += " consumed samples: {:12d} |".format(iteration * 8)
    line += " elapsed time per iteration (ms): {:.1f} |".format(elapsed_per_iteration * 1000.0)
    line += f" learning rate: {learning_rate:.6E} |"
    line += " global batch size: {:5d} |".format(8)
    for key in list(total_loss_dict):
        if key not in ("advanced iterations", "skipped iterations", "nan iterations"):
            line += " {}: {:.6E} |".format(key, total_loss_dict[key] / max(1, total_loss_dict["advanced iterations"]))
            if should_reset:
                total_loss_dict[key] = 0.0
    line += f" loss scale: {loss_scale:.1f} |"
    line += f" grad norm: {grad_norm:.3f} |"
    line += f" num zeros: {num_zeros_in_grad} |"
    line += f" params norm: {params_norm:.3f} |"
    line += " number of skipped iterations: {:3d} |".format(total_loss_dict["skipped iterations"])
    line += " number of nan iterations: {:3d} |".format(total_loss_dict["nan iterations"])
    print(line, flush=True)
    if should_reset:
        for k in ("advanced iterations", "skipped iterations", "nan iterations"):
            total_loss_dict[k] = 0


def params_l2_norm(model):
    return math.sqrt(sum(float(v) * float(v) for _, p in model.named_parameters() for v in p.data))


def print_arguments(args):
    print("------------------------ arguments ------------------------")
    for name, value in sorted(vars(args).items()):
        print("  {} {} {}".format(name, "." * (48 - len(name)), value))
    print("-------------------- end of arguments ---------------------", flush=True)


def save_checkpoint(folder, iteration, model, optimizer, scheduler):
    adam = optimizer.optimizer
    state = {"iteration": iteration, "scheduler_steps": scheduler.num_steps, "adam_steps": adam.steps,
             "lr": adam.param_groups[0]["lr"].hex(),
             "params": {name: p.data.tobytes().hex() for name, p in model.named_parameters()},
             "moments": {name: [adam.state[p][k].data.tobytes().hex() for k in ("exp_avg", "exp_avg_sq")]
                         for name, p in model.named_parameters()}}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "checkpoint.json"), "w") as f:
        json.dump(state, f)
    print(f"saved checkpoint at iteration {iteration} to {folder}", flush=True)


def load_checkpoint(folder, model, optimizer, scheduler):
    with open(os.path.join(folder, "checkpoint.json")) as f:
        state = json.load(f)
    adam = optimizer.optimizer
    for name, p in model.named_parameters():
        p.data = array("f", bytes.fromhex(state["params"][name]))
        for k, hexed in zip(("exp_avg", "exp_avg_sq"), state["moments"][name]):
            adam.state[p][k].data = array("f", bytes.fromhex(hexed))
    scheduler.num_steps = state["scheduler_steps"]
    adam.param_groups[0]["lr"] = float.fromhex(state["lr"])
    if ARGS.defect != "step-not-restored":
        adam.steps = state["adam_steps"]
    print(f"loaded checkpoint from {folder} at iteration {state['iteration']}", flush=True)
    return state["iteration"]


def pretrain(args):
    global ARGS, TIMER
    ARGS = args
    print_arguments(args)
    model = Model(1234)
    optimizer = Optimizer(model, 0.0)
    scheduler = Scheduler(args.lr, args.lr / 10, 3, args.train_iters)
    scheduler.step(optimizer)
    start = load_checkpoint(args.load, model, optimizer, scheduler) if args.load else 0
    total_loss_dict = {}
    TIMER = IntervalTimer()
    for iteration in range(start + 1, args.train_iters + 1):
        if args.defect == "timer-loses-one" and iteration == 6:
            TIMER.stop()
        loss_dict, skipped, grad_norm, num_zeros = train_step(None, data, model, optimizer, scheduler, None, None,
                                                              iteration=iteration)
        if args.defect == "timer-loses-one" and iteration == 6:
            TIMER.start()
        lr = optimizer.optimizer.param_groups[0]["lr"]
        training_log(loss_dict, total_loss_dict, lr, iteration, 1.0, False, skipped, grad_norm,
                     params_l2_norm(model), num_zeros, None, is_first_iteration=iteration == start + 1)
        if args.save and args.save_interval and iteration % args.save_interval == 0:
            save_checkpoint(args.save, iteration, model, optimizer, scheduler)
        if args.exit_interval and iteration % args.exit_interval == 0:
            print(f"exiting program at iteration {iteration}", flush=True)
            break
    return 0
