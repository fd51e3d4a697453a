# Shaped like a loss function handed a dict of losses, of which some are backpropagated.


def loss_func(inputs, losses):
    require_bp_keys = ["pg_loss"]
    mask = inputs["token_mask"].float()
    total = 0
    report = {}
    for key, loss in losses.items():
        final = (loss.float() * mask).sum()
        if key in require_bp_keys:
            total = total + final
        report[key] = final.detach().clone()
    report["total"] = total.detach()
    return total, report
