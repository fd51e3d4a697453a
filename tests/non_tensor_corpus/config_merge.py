"""Configuration handling: dicts of settings merged and returned with what they came from."""


def merge(base, override):
    merged = dict(base)
    merged.update(override)
    changed = {key: override[key] for key in override if base.get(key) != override[key]}
    return merged, {"base": base, "changed": changed}


def pick(options, name, default):
    value = options.get(name, default)
    return value, {"name": name, "value": value}


class Registry:
    def __init__(self):
        self.entries = {}

    def register(self, name, factory):
        entry = self.entries.setdefault(name, factory)
        return entry, {"entry": entry, "count": len(self.entries)}
