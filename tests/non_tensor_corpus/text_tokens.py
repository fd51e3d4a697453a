"""A small tokenizer: strings and lists of strings all the way down."""


def split_header(line):
    name, _, value = line.partition(":")
    name = name.strip().lower()
    return name, {"name": name, "value": value.strip()}


def tokenize(text, vocab):
    words = text.split()
    first = words[0] if words else ""
    ids = [vocab.get(word, 0) for word in words]
    return first, {"first": first, "ids": ids, "words": words}


def longest_prefix(entries):
    prefix = entries[0]
    for entry in entries[1:]:
        while not entry.startswith(prefix):
            prefix = prefix[:-1]
    return prefix, {"prefix": prefix, "rest": [entry[len(prefix) :] for entry in entries]}
