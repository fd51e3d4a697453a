"""A deterministic corpus of training-repository-like code, for the performance tests and `bench/bench.py`.

Most of it is what a training repository is mostly made of (models, data, utilities, scripts) and
must be skipped cheaply; some of it is loss functions in every shape the analysis understands,
buggy and clean, so that the triage has to find them wherever they hide: methods, closures,
lambdas, reports built over several statements or returned through names, aliased imports.
"""

from __future__ import annotations

import random
from pathlib import Path
from string import Template

HEADERS = (
    "import torch\n",
    "import torch as th\n",
    "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n",
    "from collections import OrderedDict as OD\nimport torch\n",
    "import collections\nimport copy\nimport torch\n",
    "from copy import deepcopy\nfrom typing import Dict, Optional\n\nimport torch\n",
    '"""Module docstring.\n\nWith a column-0 line:\ndef not_code(x):\n    return x, {}\n"""\n\nimport torch\n',
)

# $T is the torch module name of the chosen header; $L, $R, $K are the loss, report and key names.
LOSS_FUNCTIONS = (
    # the seed bug and its fix
    "def $f(output_tensor, mask):\n    $L = (output_tensor * mask).sum()\n"
    "    return $L, {'$K': ($L.detach(), mask.sum().detach())}\n",
    "def $f(output_tensor, mask):\n    $L = (output_tensor * mask).sum()\n"
    "    return $L, {'$K': ($L.detach().clone(), mask.sum().detach())}\n",
    # report through a local, several statements
    "def $f(output_tensor):\n    $L = output_tensor.float().mean()\n    $R = {}\n    $R['$K'] = $L.detach()\n"
    "    $R['ppl'] = $T.exp($L).item()\n    return $L, $R\n",
    "def $f(output_tensor, num_tokens):\n    $L = output_tensor.sum()\n    $R = dict(lm_loss=$L.data)\n"
    "    $R.update(tokens=num_tokens)\n    return $L, num_tokens, $R\n",
    # views and conversions
    "def $f(logits, labels):\n    $L = $T.nn.functional.cross_entropy(logits, labels, reduction='none')\n"
    "    return $L.sum(), {'$K': $L.view(-1)[0], 'first': $L[0]}\n",
    "def $f(output_tensor):\n    $L = output_tensor.mean()\n    return $L, {'$K': $L.float(), 'cpu': $L.detach().cpu()}\n",
    "def $f(output_tensor):\n    $L = output_tensor.mean()\n    return $L, {'$K': $L.item(), 'copy': $L.detach().clone()}\n",
    # the backprop tensor itself
    "def $f(output_tensor):\n    $L = output_tensor.sum() / 2\n    return $L, {'$K': $L}\n",
    # IfExp, branches, loops, try
    "def $f(output_tensor, training):\n    $L = output_tensor.sum()\n"
    "    shown = $L.detach() if training else $L.item()\n    return $L, {'$K': shown}\n",
    "def $f(output_tensor, parts):\n    $L = output_tensor.sum()\n    $R = {}\n    for name in parts:\n"
    "        $R[name] = $L.detach()\n    return $L, $R\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    try:\n        shown = $L.detach()\n"
    "    except RuntimeError:\n        shown = None\n    return $L, {'$K': shown}\n",
    # returned through a name, a list, a subscript, an IfExp
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    out = ($L, {'$K': $L.detach()})\n    return out\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    outs = [($L, {'$K': $L.detach()})]\n    return outs[0]\n",
    "def $f(output_tensor, flag):\n    $L = output_tensor.sum()\n"
    "    return ($L, {'$K': $L.detach()}) if flag else ($L, {'$K': $L.item()})\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    $R = None\n    $R = {'$K': $L.detach()} if $L is not None else {}\n"
    "    return [$L, $R]\n",
    # containers built oddly: the triage must not lose these
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    $R = None\n    $R['$K'] = $L.detach()\n    return $L, $R\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    pair = [$L]\n    pair.append({'$K': $L.detach()})\n"
    "    return pair[0], pair[1]\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    $R = {'$K': $L.detach()}\n    return $L, copy.copy($R)\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    box = {'r': {'$K': $L.detach()}}\n    return $L, box.get('r')\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    $R = {}\n    $R.setdefault('$K', $L.detach())\n    return $L, $R\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    stats = [{'$K': $L.detach()}]\n    for $R in stats:\n"
    "        pass\n    return $L, $R\n",
    "def $f(output_tensor):\n    $L = output_tensor.sum()\n    if ($R := {'$K': $L.detach()}):\n        pass\n    return $L, $R\n",
    # lambdas
    "$f = lambda output_tensor: (output_tensor.sum(), {'$K': output_tensor.sum().detach()})\n",
    "$f = lambda out: (out, {'$K': out.detach()})\n",
    # closure: the loss function gets the enclosing function's environment
    "def forward_step_$f(data_iterator, model):\n    tokens, mask = next(data_iterator)\n    output_tensor = model(tokens)\n"
    "    $R = {}\n\n    def $f(output_tensor):\n        $L = (output_tensor * mask).sum()\n"
    "        $R['$K'] = $L.detach()\n        return $L, $R\n\n    return output_tensor, $f\n",
    "def forward_step_$f(data_iterator, model):\n    output_tensor = model(next(data_iterator))\n"
    "    scale = output_tensor.detach()\n    return output_tensor, lambda x: (x, {'$K': scale})\n",
    # a method, a nested class, a decorated function
    "class $C:\n    '''A trainer.'''\n\n    scale = 1.0\n\n    def __init__(self, model):\n        self.model = model\n\n"
    "    def $f(self, output_tensor):\n        $L = output_tensor.sum() * self.scale\n"
    "        self.last = {'$K': $L.detach()}\n        return $L, self.last\n",
    "class $C:\n    class Inner:\n        @staticmethod\n        def $f(output_tensor):\n"
    "            $L = output_tensor.sum()\n            return $L, {'$K': $L.detach()}\n",
    "@torch.no_grad()\ndef $f(output_tensor):\n    $L = output_tensor.sum()\n    return $L, {'$K': $L.detach()}\n",
    # unreachable nested function: still checked
    "def $f(output_tensor):\n    return output_tensor\n    def inner(x):\n        return x, {'$K': x.detach()}\n",
)

ORDINARY = (
    "class $C(nn.Module if 'nn' in dir() else object):\n    def __init__(self, hidden, heads=$N):\n"
    "        super().__init__()\n        self.hidden = hidden\n        self.heads = heads\n"
    "        self.cache = {}\n\n    def forward(self, x, mask=None):\n        out = x * $N\n        bias = None\n"
    "        if mask is not None:\n            out = out.masked_fill(mask, 0.0)\n        return out, bias\n\n"
    "    def extra_repr(self):\n        return f'hidden={self.hidden}, heads={self.heads}'\n",
    "def $f(batch, seq_length=$N):\n    tokens = batch['tokens'][:, :seq_length]\n"
    "    labels = batch['labels'][:, 1 : seq_length + 1]\n    attention_mask = tokens.new_ones(tokens.shape)\n"
    "    attention_mask[:, 0] = 0\n    position_ids = tokens.cumsum(-1)\n    return tokens, labels, attention_mask, position_ids\n",
    "def $f(config):\n    args = {k: v for k, v in vars(config).items() if not k.startswith('_')}\n"
    "    args['world_size'] = $N\n    return args\n",
    "def $f(model, optimizer, iteration):\n    state = {'model': model.state_dict(), 'optimizer': optimizer.state_dict()}\n"
    "    state['iteration'] = iteration\n    torch.save(state, f'ckpt_{iteration}.pt')\n",
    "def $f(values, num_buckets=$N):\n    buckets = [[] for _ in range(num_buckets)]\n"
    "    for i, value in enumerate(values):\n        buckets[i % num_buckets].append(value)\n"
    "    sizes = [len(b) for b in buckets]\n    return buckets, sizes\n",
    "class $C:\n    def __init__(self, path, seq_length=$N):\n        self.path = path\n        self.seq_length = seq_length\n"
    "        self.index = list(range($N))\n\n    def __len__(self):\n        return len(self.index)\n\n"
    "    def __getitem__(self, idx):\n        sample = self.index[idx]\n"
    "        return {'text': sample, 'length': self.seq_length}\n",
    "def $f(timers, names, normalizer=1.0):\n    elapsed = {}\n    for name in names:\n"
    "        elapsed[name] = timers(name).elapsed(reset=False) / normalizer\n"
    "    string = ' | '.join(f'{k}: {v:.2f}' for k, v in elapsed.items())\n    return string\n",
    "def $f(x, weight, bias=None):\n    output = torch.matmul(x, weight.t())\n    if bias is not None:\n"
    "        output = output + bias\n    return output, bias\n",
    "def $f(tensor, group=None):\n    world = $N\n    chunks = tensor.chunk(world)\n"
    "    gathered = [c.clone() for c in chunks]\n    return torch.cat(gathered), world\n",
    "def $f(params, lr=$N.0e-4, weight_decay=0.1):\n    decay, no_decay = [], []\n    for p in params:\n"
    "        (no_decay if p.ndim < 2 else decay).append(p)\n"
    "    return [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': 0.0}]\n",
    "def $f(args):\n    if args.fp16:\n        dtype = torch.half\n    elif args.bf16:\n        dtype = torch.bfloat16\n"
    "    else:\n        dtype = torch.float\n    return dtype, {'fp16': args.fp16, 'bf16': args.bf16}\n",
    "async def $f(queue):\n    results = []\n    while not queue.empty():\n        item = await queue.get()\n"
    "        results.append(item)\n    return results\n",
    "def $f(logits, top_k=$N):\n    values, indices = torch.topk(logits, top_k)\n    probs = values.softmax(-1)\n"
    "    return probs, indices\n",
)

NAMES = ("alpha", "beta", "gamma", "delta", "sigma", "omega", "kappa", "theta", "zeta", "lambda_")
LOSSES = ("loss", "total_loss", "lm_loss", "loss_sum", "averaged")
REPORTS = ("report", "stats", "metrics", "log_dict", "reduced")
KEYS = ("lm loss", "loss", "ppl", "loss_reduced", "z_loss")


def _fill(template: str, rng: random.Random, torch_name: str, serial: int) -> str:
    name = f"{rng.choice(NAMES)}_{serial}"
    return Template(template).substitute(
        f=f"fn_{name}",
        C=f"Class{name.title().replace('_', '')}",
        L=rng.choice(LOSSES),
        R=rng.choice(REPORTS),
        K=rng.choice(KEYS),
        T=torch_name,
        N=str(rng.randint(2, 64)),
    )


def module_text(rng: random.Random, snippets: int, loss_share: float) -> str:
    header = rng.choice(HEADERS)
    torch_name = "th" if "torch as th" in header else "torch"
    parts = [header]
    for serial in range(snippets):
        pool = LOSS_FUNCTIONS if rng.random() < loss_share else ORDINARY
        parts.append(_fill(rng.choice(pool), rng, torch_name, serial))
    return "\n\n".join(parts)


def generate(root: Path, *, files: int = 300, seed: int = 0, loss_share: float = 0.04) -> list[Path]:
    """Write `files` modules under `root` (in a few packages) and return their paths.

    At the default size (300 files) this is about 45k lines; `files` scales it linearly.
    """
    rng = random.Random(seed)
    written = []
    for index in range(files):
        package = root / f"pkg_{index % 7}" / ("tests" if index % 5 == 0 else "core")
        package.mkdir(parents=True, exist_ok=True)
        path = package / f"module_{index}.py"
        path.write_text(module_text(rng, rng.randint(8, 24), loss_share))
        written.append(path)
    return written
