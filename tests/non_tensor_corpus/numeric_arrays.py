"""Array code on numpy, where a slice is a view but `.detach()` does not exist."""

import numpy as np


def running_stats(values):
    data = np.asarray(values, dtype=np.float64)
    mean = data.mean()
    window = data[-10:]
    return mean, {"window": window, "mean": mean, "data": data}


def normalize(matrix):
    rows = np.array(matrix)
    norms = np.linalg.norm(rows, axis=1)
    view = rows.reshape(-1)
    return rows, {"flat": view, "norms": norms}
