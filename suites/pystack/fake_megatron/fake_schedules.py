"""Shaped like megatron/core/pipeline_parallel/schedules.py: forward_step_calc_loss(model, output_tensor, ...)
returns the loss its loss function makes of output_tensor (here: the value itself)."""


def forward_step_calc_loss(model, output_tensor, loss_func=None):
    return output_tensor
