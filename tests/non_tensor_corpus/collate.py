"""A collate function over Python lists: pads token ids, builds masks, returns the batch dict."""


def pad_to(sequences, length, value):
    return [list(seq) + [value] * (length - len(seq)) for seq in sequences]


def collate(batch, pad_id):
    longest = max(len(example["input_ids"]) for example in batch)
    collated = {}
    collated["input_ids"] = pad_to([example["input_ids"] for example in batch], longest, pad_id)
    collated["attention_mask"] = pad_to([[1] * len(example["input_ids"]) for example in batch], longest, 0)
    collated["labels"] = pad_to([example["labels"] for example in batch], longest, -100)
    return collated["input_ids"], {"input_ids": collated["input_ids"], "labels": collated["labels"]}


def split_batch(batch, micro):
    chunks = [batch[i : i + micro] for i in range(0, len(batch), micro)]
    first = chunks[0]
    return first, {"first": chunks[0], "rest": chunks[1:]}
