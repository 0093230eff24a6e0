"""A loop shaped like Megatron's for the NaN injection test: each train_step makes two microbatch losses through
forward_step_calc_loss and has one bucket group of two buckets check its grads, which start at 1.0."""
import fake_buffer
import fake_schedules


def train_step(i, group):
    for b in group.buckets:
        b.grad_data.fill_(1.0)
    losses = [fake_schedules.forward_step_calc_loss(None, 1.0 + i) for _ in range(2)]
    return losses, group.check_grads(True, False)


def train(iterations):
    group = fake_buffer._ParamAndGradBucketGroup(2)
    return [train_step(i, group) for i in range(iterations)]
