"""Reward functions living next to tensor code: the module imports torch, the scores are floats."""

import torch


def format_reward(response, pattern):
    matched = pattern.fullmatch(response.strip())
    score = 1.0 if matched else 0.0
    return score, {"score": score}


def accuracy_reward(prediction, reference, weight):
    correct = prediction.strip() == reference.strip()
    score = weight if correct else -weight
    return score, {"score": score, "correct": correct}


def gsm8k_score(solution, answer, parse):
    predicted = parse(solution)
    score = float(predicted == answer)
    extra = {"score": score, "predicted": predicted}
    return score, extra


def batch_to_tensor(scores):
    return torch.tensor(scores)
