"""Learning-rate schedules: floats computed from the step and the configured base rate."""

import math


def warmup_cosine(step, base_lr, warmup, total):
    if step < warmup:
        lr = base_lr * step / warmup
    else:
        progress = (step - warmup) / max(1, total - warmup)
        lr = base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr, {"lr": lr, "step": step}


def inverse_sqrt(step, base_lr, warmup):
    lr = base_lr
    if step > warmup:
        lr = base_lr * (warmup / step) ** 0.5
    return lr, {"lr": lr}


def scaled(groups, factor):
    rates = [group["lr"] for group in groups]
    top = rates[0]
    return top, {"top": top, "scaled": [rate * factor for rate in rates]}
