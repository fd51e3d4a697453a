"""Integer bookkeeping of a pass scheduler: costs come from an estimator the caller passes in."""


def reorder_for_overlap(nodes, estimate):
    total = estimate(nodes[0])
    best = total
    for node in nodes[1:]:
        cost = estimate(node)
        if cost < best:
            best = cost
        total = total + cost
    return best, {"total": total, "best": best}


def assign_stages(nodes, num_stages, weight):
    per_stage = max(1, len(nodes) // num_stages)
    stage_of = {}
    load = weight(nodes[0])
    for index, node in enumerate(nodes):
        stage_of[node] = min(index // per_stage, num_stages - 1)
        load = load + weight(node)
    return load, {"stages": stage_of, "load": load}


def bucket_sizes(sizes, cap):
    current = sizes[0]
    buckets = [current]
    for size in sizes[1:]:
        if current + size > cap:
            current = size
            buckets.append(current)
        else:
            current = current + size
            buckets[-1] = current
    return buckets[-1], {"last": buckets[-1], "count": len(buckets)}
