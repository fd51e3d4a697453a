"""Which classes of a project derive a host's class (`HostEvidence._derives`): a base imported in any branch of a
module-level `if`/`try` may be any of the classes those branches import (`Symbols.branch_imports`)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.index.symbols import Symbols

TRAINER = """
class DistillTrainer({base}):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = model(**inputs)["loss"]
        self.kept = loss.detach()
        return loss
"""


def _contexts(header: str, base: str = "HFTrainer") -> set[str]:
    index = ProjectIndex.of_source(textwrap.dedent(header) + TRAINER.format(base=base), "trainer.py")
    return {reach.context for reach in index.reached.values()}


@pytest.mark.parametrize(
    "header",
    [
        # TRL's trainer moved between releases: each branch imports it from its own place (ms-swift's GKD trainer)
        """
        import trl
        from packaging import version
        if version.parse(trl.__version__) >= version.parse("0.26.0"):
            from trl.experimental.gkd import GKDTrainer as HFTrainer
        else:
            from trl import GKDTrainer as HFTrainer
        """,
        """
        try:
            from transformers import Trainer as HFTrainer
        except ImportError:
            HFTrainer = object
        """,
        # the host's only in the handler of a failed import of something else
        """
        try:
            from fast_kernels import Trainer as HFTrainer
        except ImportError:
            from transformers import Trainer as HFTrainer
        """,
        # `import transformers` in a branch, the base named through it
        """
        try:
            import transformers
        except ImportError:
            transformers = None
        """,
    ],
    ids=["if-version", "try", "except", "module-in-try"],
)
def test_a_trainer_imported_in_a_branch_is_a_trainer(header: str) -> None:
    base = "transformers.Trainer" if "import transformers\n" in header else "HFTrainer"
    assert _contexts(header, base) == {"transformers-training-step"}


@pytest.mark.parametrize(
    "header",
    [
        # the project's own Trainer, whichever way it is imported
        """
        try:
            from .trainer_base import Trainer as HFTrainer
        except ImportError:
            from trainer_base import Trainer as HFTrainer
        """,
        # imported inside a function: not the module's name
        """
        def load():
            from transformers import Trainer as HFTrainer
            return Base
        HFTrainer = object
        """,
    ],
    ids=["own", "in-a-function"],
)
def test_a_base_no_branch_imports_from_a_host_is_not_one(header: str) -> None:
    assert _contexts(header) == set()


def test_branch_imports_reads_every_branch_of_the_top_level_only() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            import os
            try:
                from a import X
            except ImportError:
                from b import X as X
            else:
                import c.d
            finally:
                pass
            if True:
                with ctx():
                    from e import X
            class C:
                from f import X
            def g():
                from h import X
            """
        )
    )
    imports = {name: sorted(targets) for name, targets in Symbols(tree).branch_imports.items()}
    assert imports == {"os": ["os"], "X": ["a.X", "b.X", "e.X"], "c": ["c"]}
