"""The work of gpu_threads.py: each line that syncs is named in EXPECTED by its marker comment."""
import torch


def step(x, threads):
    """One iteration: each thread reads scalars (GIL held in .item()); the main thread then synchronizes (the GIL is
    released inside torch.cuda.synchronize)."""
    results = []

    def reader(k):
        y = x * (k + 1)
        results.append(y.sum().item())  # SYNC item
        results.append(float(y.max()))  # SYNC float

    for t in threads(reader):
        t.join()
    torch.cuda.synchronize()  # SYNC synchronize
    return results
