"""A training program shaped like Megatron-LM's pretrain_gpt.py, in plain Python, for `loopgate pair`'s CPU tests
of the exact values the shim records (tools/cupti/loopgate_pyshim/loopgate_values.py): it prints Megatron's
arguments block and log lines, and its loop calls train_step and training_log of fake_pretrain_training with
Megatron's argument names. `--defect NAME` plants one of the changes the tests must reject (the test side's
candidates; fake_pretrain_training.py says what each does).

    python3 fake_pretrain.py [--train-iters N] [--log-interval K] [--step-ms MS] [--defect NAME]
                             [--save DIR --save-interval K --exit-interval K] [--load DIR]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_pretrain_training  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--train-iters", type=int, default=12)
p.add_argument("--log-interval", type=int, default=1)
p.add_argument("--step-ms", type=float, default=50.0)
p.add_argument("--lr", type=float, default=1.0e-2)
p.add_argument("--data-path", default="/data/fake_text_document")
p.add_argument("--save", default="")
p.add_argument("--save-interval", type=int, default=0)
p.add_argument("--exit-interval", type=int, default=0)
p.add_argument("--load", default="")
p.add_argument("--defect", default="none", choices=fake_pretrain_training.DEFECTS)
sys.exit(fake_pretrain_training.pretrain(p.parse_args()))
