"""Int bookkeeping in a module that imports torch (as a compiler's scheduling passes do)."""

import torch


def estimate_overlap(snodes, runtime_of):
    compute = 0
    comm = 0
    for snode in snodes:
        cost = runtime_of(snode)
        if snode.is_collective:
            comm = comm + cost
        else:
            compute = compute + cost
    exposed = max(comm - compute, 0)
    return exposed, {"compute": compute, "comm": comm, "exposed": exposed}


def visualize(order, name_of):
    steps = [name_of(node) for node in order]
    first = steps[0]
    return first, {"first": first, "steps": steps, "device": torch.cuda.is_available()}
