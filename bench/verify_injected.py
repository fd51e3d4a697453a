"""`verify` on real loss functions: aliases injected into copies of public trees, each run and judged.

Each injection puts an alias of the backprop tensor into the report of a loss function the tree really
hands to Megatron (its forward step returns it to `forward_backward_func` / `pretrain`), in a copy of
the tree's Python files under OUT/<tree> (the trees themselves are only read). `verify` then runs on
each injected file; the table is one row per finding, with the tree's commit and what Megatron does to
that function's outputs. A row whose alias is "(in the tree)" is a finding the tree has as published.

    python bench/verify_injected.py [--trees /work/trees] [--out /tmp/verify/inject] [--tree NAME ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Injection:
    tree: str
    path: str  # in the tree
    function: str  # as the table names it
    old: str  # text replaced; must occur exactly once
    new: str
    alias: str  # the injected report entry, as the table shows it


INJECTIONS = (
    Injection(
        "miles",
        "miles/backends/training_utils/loss.py",
        "loss_function",
        '            "keys": list(log.keys()),\n',
        '            "keys": list(log.keys()),\n            "raw_loss": loss.detach(),\n',
        '"raw_loss": loss.detach()',
    ),
    Injection("twinkle", "src/twinkle/model/megatron/strategy/megatron.py", "reduce_loss", "", "", "(in the tree)"),
    Injection(
        "SkyRL",
        "skyrl/backends/skyrl_train/workers/megatron/megatron_model_wrapper.py",
        "loss_func (cross_entropy path)",
        '                    "loss": unscaled_loss.detach().item(),\n',
        '                    "loss": unscaled_loss.detach().item(),\n                    "scaled_loss": loss.detach(),\n',
        '"scaled_loss": loss.detach()',
    ),
    Injection(
        "ChatLearn",
        "chatlearn/algorithm/grpo_utils/megatron_utils/train_helper.py",
        "loss_func",
        '    reporting_losses["num_samples"] = torch.ones_like(num_tokens)\n',
        '    reporting_losses["num_samples"] = torch.ones_like(num_tokens)\n'
        '    reporting_losses["total_loss"] = total_loss_for_bp.detach()\n',
        'reporting_losses["total_loss"] = total_loss_for_bp.detach()',
    ),
    Injection(
        "NeMo-Aligner",
        "nemo_aligner/models/nlp/gpt/megatron_gpt_dpo_model.py",
        "loss_func (DPO)",
        '                        "avg": reduced_loss,\n',
        '                        "avg": reduced_loss,\n                        "loss": loss.detach(),\n',
        '"loss": loss.detach()',
    ),
    Injection(
        "NeMo-Aligner",
        "nemo_aligner/models/nlp/gpt/megatron_gpt_critic.py",
        "loss_func (critic)",
        '                return loss, {"avg": reduced_loss}\n',
        '                return loss, {"avg": reduced_loss, "loss": loss.detach()}\n',
        '"loss": loss.detach()',
    ),
    Injection(
        "NeMo-Aligner",
        "nemo_aligner/models/nlp/gpt/megatron_gpt_ppo_actor.py",
        "loss_func (PPO actor)",
        '                        "ppo_ratio": ppo_ratio,\n',
        '                        "ppo_ratio": ppo_ratio,\n                        "raw_loss": loss.detach(),\n',
        '"raw_loss": loss.detach()',
    ),
    Injection(
        "NeMo-Aligner",
        "nemo_aligner/models/nlp/gpt/megatron_gpt_reward_model.py",
        "loss_func (reward model)",
        "                loss_for_ub = loss_for_ub[mask_valid_pairs].mean()\n",
        "                loss_for_ub = loss_for_ub[mask_valid_pairs].mean()\n"
        '                return loss_for_ub, {"loss": loss_for_ub.detach()}\n',
        '"loss": loss_for_ub.detach()',
    ),
    Injection(
        "Pai-Megatron-Patch",
        "megatron_patch/template/helper.py",
        "loss_func (template)",
        '        return loss[0] / loss[1] * args.context_parallel_size, {"lm loss": averaged_loss}\n',
        "        token_mean = loss[0] / loss[1] * args.context_parallel_size\n"
        '        return token_mean, {"lm loss": averaged_loss, "token_mean": token_mean.detach()}\n',
        '"token_mean": token_mean.detach()',
    ),
    Injection(
        "Pai-Megatron-Patch",
        "examples/llava_mcore/pretrain_llava.py",
        "loss_func (LLaVA)",
        "    return (total_loss, local_num_tokens, {'lm loss': (reporting_loss[0], reporting_loss[1])})\n",
        "    return (total_loss, local_num_tokens, {'lm loss': (reporting_loss[0], reporting_loss[1]),"
        " 'total': total_loss.detach()})\n",
        "'total': total_loss.detach()",
    ),
)


def _copy_tree(tree: Path, out: Path) -> None:
    """The tree's Python files (and pyproject.toml) under ``out``, fresh."""
    shutil.rmtree(out, ignore_errors=True)
    for source in tree.rglob("*"):
        if (
            source.is_file()
            and (source.suffix == ".py" or source.name == "pyproject.toml")
            and ".git" not in source.parts
        ):
            target = out / source.relative_to(tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    # A git work tree, as the tree is: the project's root (and where its settings are read) is the copy's.
    subprocess.run(["git", "init", "-q", str(out)], check=True)


def _inject(copy: Path, injection: Injection) -> None:
    if not injection.old:
        return
    path = copy / injection.path
    text = path.read_text()
    if text.count(injection.old) != 1:
        raise SystemExit(
            f"{injection.tree}/{injection.path}: the text to replace occurs {text.count(injection.old)} times"
        )
    path.write_text(text.replace(injection.old, injection.new))


def _commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default="/work/trees", type=Path)
    parser.add_argument("--out", default="/tmp/verify/inject", type=Path)
    parser.add_argument("--json", type=Path, help="also write every verdict here")
    parser.add_argument("--tree", action="append", help="only this tree (repeatable); default: every tree")
    args = parser.parse_args()
    rows, everything = [], []
    for tree in dict.fromkeys(i.tree for i in INJECTIONS):
        if args.tree and tree not in args.tree:
            continue
        injections = [i for i in INJECTIONS if i.tree == tree]
        copy = args.out / tree
        _copy_tree(args.trees / tree, copy)
        for injection in injections:
            _inject(copy, injection)
        paths = sorted({str(copy / i.path) for i in injections})
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-m", "flux_alias_lint", "verify", "--format", "json", *paths],
            capture_output=True,
            text=True,
            check=False,  # 1: some finding unconfirmed, which the table shows
            env=env,
            cwd=copy,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"{tree}: verify exited {done.returncode}: {done.stderr.strip()}")
        verdicts = json.loads(done.stdout)
        everything.extend(verdicts)
        commit = _commit(args.trees / tree)
        for verdict in verdicts:
            relative = os.path.relpath(verdict["path"], copy)
            owner = next((i for i in injections if i.path == relative), None)
            function, alias = (owner.function, owner.alias) if owner else ("?", "(in the tree)")
            status = "CONFIRMED" if verdict["confirmed"] else "UNCONFIRMED"
            detail = verdict["detail"].replace("|", "\\|")
            rows.append(
                f"| {tree} | `{commit}` | `{relative}:{verdict['line']}` {function} | `{alias}` | {status} | {detail} |"
            )
    for modelled in sorted({v["modelled"] for v in everything}):
        print(f"- modelled: {modelled}")
    print()
    print("| tree | commit | function | injected alias | verdict | reason |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    confirmed = sum(v["confirmed"] for v in everything)
    print(f"\n{len(everything)} findings: {confirmed} confirmed, {len(everything) - confirmed} unconfirmed")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
