"""A module shaped like megatron/training/training.py: train() calls train_step by its global name."""


def train_step(i):
    return i * 2


def train(iterations):
    return [train_step(i) for i in range(iterations)]
