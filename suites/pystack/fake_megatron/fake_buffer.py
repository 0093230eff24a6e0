"""Shaped like megatron/core/distributed/param_and_grad_buffer.py: a bucket group whose check_grads reads each
bucket's grad_data (here a float behind fill_)."""


class _Grad:
    def __init__(self):
        self.value = 1.0

    def fill_(self, v):
        self.value = v


class _Bucket:
    def __init__(self):
        self.grad_data = _Grad()


class _ParamAndGradBucketGroup:
    def __init__(self, n):
        self.buckets = [_Bucket() for _ in range(n)]

    def check_grads(self, check_for_nan_or_inf, check_for_large):
        return [b.grad_data.value for b in self.buckets]
