"""Helpers whose parameters say what they hold: annotations are evidence the analysis already uses."""


def split_header(line: str):
    name, _, value = line.partition(":")
    name = name.strip().lower()
    return name, {"name": name, "value": value.strip()}


def clamp(x: float, lo: float, hi: float):
    value = min(max(x, lo), hi)
    return value, {"value": value, "clipped": value != x}


def count_words(text: str, limit: int | None = None):
    count = len(text.split())
    if limit is not None and count > limit:
        count = limit
    return count, {"count": count, "limit": limit}


def ratio(done: int, total: int):
    fraction = done / total if total else 0.0
    return fraction, {"fraction": fraction, "percent": round(100 * fraction)}
