"""docs/editor.md's Neovim recipe for 0.7 to 0.10, run in the Neovim on PATH when it is one of those
releases (Debian 12 ships 0.7.2): diagnostics arrive, and the fix-all line fixes the buffer."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

ROOT = Path(__file__).resolve().parents[1]
BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP


def _neovim() -> tuple[int, int] | None:
    if shutil.which("nvim") is None:
        return None
    version = subprocess.run(["nvim", "--version"], capture_output=True, text=True, check=False).stdout
    found = re.match(r"NVIM v(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def _lua_blocks(heading: str) -> list[str]:
    text = (ROOT / "docs" / "editor.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```lua\n(.*?)```", section, re.DOTALL)


# After the recipe: wait for the diagnostics, write them out, run the fix-all line picking the one
# action it lists (0.7's code_action asks through vim.ui.select), write the fixed buffer, quit.
DRIVER = """\
vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local out = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out, (d.lnum + 1) .. ":" .. (d.col + 1) .. ": " .. d.message)
end
vim.ui.select = function(items, opts, choose)
  table.insert(out, "actions: " .. #items)
  choose(items[1], 1)
end
FIX_ALL
vim.wait(60000, function() return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\\n"):find("clone") end, 50)
vim.list_extend(out, vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.fn.writefile(out, "out.txt")
vim.cmd("qa!")
"""


@pytest.mark.skipif(not (0, 7) <= (_neovim() or (0, 0)) < (0, 11), reason="needs Neovim 0.7 to 0.10 on PATH")
def test_the_neovim_0_7_recipe_shows_the_finding_and_fixes_the_buffer(tmp_path: Path) -> None:
    recipe, fix_all = _lua_blocks("Neovim 0.7 to 0.10")
    server = '{ "flux-alias-lint", "server" }'
    assert server in recipe
    recipe = recipe.replace(server, f"{{ {sys.executable!r}, '-m', 'flux_alias_lint', 'server' }}")
    (tmp_path / "init.lua").write_text(recipe)
    (tmp_path / "driver.lua").write_text(DRIVER.replace("FIX_ALL", fix_all))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    (tmp_path / "train.py").write_text(BUG)
    run = subprocess.run(
        ["nvim", "--headless", "--clean", "-u", "init.lua", "train.py", "-c", "luafile driver.lua"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),  # this checkout's server
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    out = (tmp_path / "out.txt").read_text().splitlines() if (tmp_path / "out.txt").exists() else []
    assert run.returncode == 0 and out, run.stdout + run.stderr
    assert out[0].startswith('3:27: report["loss"] = `loss.detach()` is a detached alias'), out
    assert out[0].endswith("[megatron via train.py:6]"), out
    assert out[1] == "actions: 1"
    assert "\n".join(out[2:]) + "\n" == BUG.replace("loss.detach()", "loss.detach().clone()")
