"""A small PyTorch loop with the host-sync sites of Megatron PR #7076, for the loopgate CUPTI injection library.

    CUDA_INJECTION64_PATH=build/gpu/tools/cupti/libloopgate_sync_inject.so \
    LOOPGATE_CUPTI_ROI=roi LOOPGATE_CUPTI_ITER=iteration python3 tools/cupti/example_sync_sites.py

Each iteration queues device work (bf16 matmuls), then runs one site per NVTX range, so every site's host
cost is measured behind pending work (docs/design.md "GPU facts": 20 of 20 pageable copies blocked behind pending device work):
  item                 x.sum().item()                               -> 1 cuStreamSynchronize, blocks
  tensor_h2d           torch.tensor([0.0], device='cuda')           -> pageable H2D copy + sync, blocks
  full                 torch.full((1,), 0.0, device='cuda')         -> no copy, no sync
  pageable_nonblocking pageable_dst.copy_(y, non_blocking=True)    -> NO sync call, but blocks (hidden stall)
  pinned_nonblocking   pinned_dst.copy_(y, non_blocking=True)      -> no sync, does not block
and one bare .item() outside any site range, attributed by the calling frame's symbol (dladdr).
Warm-up runs outside the region of interest ("roi"), so first-call costs do not count.
"""
import os
import time

import torch

MATMULS = int(os.environ.get("EXAMPLE_MATMULS", "10"))
ITERS = int(os.environ.get("EXAMPLE_ITERS", "5"))
N = 8192


def queue_work(a, b):
    for _ in range(MATMULS):
        a = a @ b  # bf16, ~1.4 ms each on an H200: the device runs far behind the host
    return a


def site(name, fn, a, b, host_ms):
    a = queue_work(a, b)
    torch.cuda.nvtx.range_push(name)
    t0 = time.perf_counter()
    fn(a)
    host_ms.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
    torch.cuda.nvtx.range_pop()
    return a


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    a = torch.randn(N, N, device=dev, dtype=torch.bfloat16) / N**0.5
    b = torch.randn(N, N, device=dev, dtype=torch.bfloat16) / N**0.5
    y = torch.randn(1 << 20, device=dev)
    pageable_dst = torch.empty(1 << 20)
    pinned_dst = torch.empty(1 << 20, pin_memory=True)
    sites = [
        ("item", lambda x: x[0, 0].float().item()),
        ("tensor_h2d", lambda x: torch.tensor([0.0], device=dev)),
        ("full", lambda x: torch.full((1,), 0.0, device=dev)),
        ("pageable_nonblocking", lambda x: pageable_dst.copy_(y, non_blocking=True)),
        ("pinned_nonblocking", lambda x: pinned_dst.copy_(y, non_blocking=True)),
    ]
    host_ms = {}
    for name, fn in sites:  # warm-up, outside the region
        site(name, fn, a, b, {})
    torch.cuda.synchronize()

    torch.cuda.nvtx.range_push("roi")
    for it in range(ITERS):
        torch.cuda.nvtx.range_push(f"iteration {it + 1}")
        for name, fn in sites:
            a = site(name, fn, a, b, host_ms)
        a = queue_work(a, b)
        _ = a.norm().item()  # no site range: the library names the calling frame
        torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()

    print(f"example_sync_sites: {ITERS} iterations, {MATMULS} queued 8192^2 bf16 matmuls before each site")
    print(f"{'site':<22} {'host ms (median)':>17} {'max':>8}")
    for name, v in host_ms.items():
        v = sorted(v)
        print(f"{name:<22} {v[len(v) // 2]:17.3f} {v[-1]:8.3f}")


if __name__ == "__main__":
    main()
