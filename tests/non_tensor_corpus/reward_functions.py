"""Rule-based rewards of an RL recipe: plain Python floats and ints, returned with their breakdown."""

import re

_ANSWER = re.compile(r"####\s*(-?[0-9.,]+)")


def extract_answer(text):
    match = _ANSWER.search(text)
    return match.group(1).replace(",", "") if match else None


def compute_score(solution_str, ground_truth, format_score, weight):
    answer = extract_answer(solution_str)
    if answer is None:
        score = format_score
    elif answer == ground_truth:
        score = weight
    else:
        score = format_score * weight
    return score, {"score": score, "acc": answer == ground_truth}


def length_penalty(response, budget, scale):
    overflow = len(response) - budget
    score = scale
    if overflow > 0:
        score = score - overflow * scale
    return score, {"score": score, "overflow": overflow}


def best_of(samples, judge):
    scores = [judge(sample) for sample in samples]
    best = max(scores)
    return best, {"best": best, "all": scores, "mean": sum(scores) / len(scores)}
