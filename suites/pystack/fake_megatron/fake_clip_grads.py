"""Shaped like megatron/core/optimizer/clip_grads.py: the grad norm over a list of tensors, summed in fp32 in the
list's order (so a shuffled order rounds differently: the tests' planted nondeterministic reduction)."""
import math
import struct


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def get_grad_norm_fp32(grads_for_norm, norm_type=2):
    total = 0.0
    for g in grads_for_norm:
        total = f32(total + f32(sum(f32(v * v) for v in g)))
    return math.sqrt(total)
