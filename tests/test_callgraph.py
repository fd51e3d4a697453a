"""`flux-alias-lint callgraph`: each function's dotted name and the functions of the project its calls run,
computed by the hand-off search's own evaluation of callable values (`Resolver._values`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from flux_alias_lint.cli import main
from flux_alias_lint.index.callgraph import call_graph
from flux_alias_lint.index.calls import _CALLER_FILES


def _project(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(tmp_path)


def _graph(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    return call_graph(_project(tmp_path, files))


def test_names_of_modules_methods_nested_functions_and_lambdas(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                class Shape:
                    class Side:
                        def length(self):
                            return 1
                    def area(self):
                        def helper():
                            pick = lambda v: v
                            return pick(2)
                        return helper()
                first = lambda: 0
                second = lambda: first()
            """,
            "geo/__init__.py": "",
            "geo/points.py": "def origin():\n    return (0, 0)\n",
        },
    )
    assert set(graph) == {
        "app",
        "app.Shape.Side.length",
        "app.Shape.area",
        "app.Shape.area.helper",
        "app.Shape.area.helper.<lambda1>",
        "app.<lambda1>",
        "app.<lambda2>",
        "geo",
        "geo.points",
        "geo.points.origin",
    }
    assert graph["app.Shape.area"] == ["app.Shape.area.helper"]
    assert graph["app.Shape.area.helper"] == ["app.Shape.area.helper.<lambda1>"]
    assert graph["app.<lambda2>"] == ["app.<lambda1>"]


def test_a_call_through_aliases_unpacking_and_imports(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "tools/__init__.py": "from .ops import scale as resize\n",
            "tools/ops.py": "def scale(x):\n    return x\n\ndef shift(x):\n    return x\n",
            "run.py": """
                from tools import resize
                import tools.ops

                left, (right, other) = resize, (tools.ops.shift, None)
                left(1)
                right(2)
            """,
        },
    )
    assert graph["run"] == ["tools.ops.scale", "tools.ops.shift"]


def test_classes_run_their_init_by_c3_order_and_super(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "zoo.py": """
                class Animal:
                    def __init__(self):
                        pass
                    def sound(self):
                        pass
                class Bird(Animal):
                    def __init__(self):
                        super().__init__()
                class Singer(Animal):
                    def sound(self):
                        pass
                class Canary(Bird, Singer):
                    pass
                pet = Canary()
                pet.sound()
            """,
        },
    )
    assert graph["zoo"] == ["zoo.Bird.__init__", "zoo.Singer.sound"]
    assert graph["zoo.Bird.__init__"] == ["zoo.Animal.__init__"]


def test_a_method_called_on_self_runs_the_overrides_of_subclasses_in_other_modules(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "base.py": """
                class Trainer:
                    def train(self):
                        return self.step()
                    def step(self):
                        pass
                class Other:
                    def step(self):
                        pass
            """,
            "sft.py": """
                from base import Trainer
                class SFT(Trainer):
                    def step(self):
                        pass
            """,
            "dpo.py": """
                from sft import SFT
                from base import Other
                class DPO(SFT):
                    def step(self):
                        pass
                class Unrelated(Other):
                    def step(self):
                        pass
            """,
        },
    )
    assert graph["base.Trainer.train"] == ["base.Trainer.step", "dpo.DPO.step", "sft.SFT.step"]


def test_a_function_passed_to_a_class_is_what_its_init_stores_on_self(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "model.py": """
                class Model:
                    def __init__(self, body, loss_fn):
                        self._loss_fn = loss_fn
                    def loss(self, outputs):
                        return self._loss_fn(outputs)
            """,
            "build.py": """
                from model import Model
                def smoothed(outputs):
                    pass
                def focal(outputs):
                    pass
                first = Model(None, smoothed)
                second = Model(None, loss_fn=focal)
            """,
        },
    )
    assert graph["model.Model.loss"] == ["build.focal", "build.smoothed"]


def test_a_factory_result_stored_on_self_and_called_from_another_method(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "steps.py": """
                class Reducer:
                    def reduce(self, values):
                        return values

                def make_reducer():
                    return Reducer()

                class Runner:
                    def __init__(self):
                        self.reducer = make_reducer()
                        self.finish = self.reducer.reduce
                    def run(self):
                        return self.finish([])
            """,
        },
    )
    assert graph["steps.Runner.__init__"] == ["steps.make_reducer"]
    assert graph["steps.Runner.run"] == ["steps.Reducer.reduce"]
    assert graph["steps.make_reducer"] == []


def test_functions_passed_as_arguments_reach_the_parameter_called(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "engine.py": "def drive(step, *, hook=None):\n    hook()\n    return step()\n",
            "user.py": """
                from engine import drive

                def forward():
                    pass
                def notify():
                    pass
                drive(forward, hook=notify)
            """,
        },
    )
    assert graph["engine.drive"] == ["user.forward", "user.notify"]
    assert graph["user"] == ["engine.drive"]


def test_a_function_returning_its_parameter_gives_each_call_what_it_passes(tmp_path: Path) -> None:
    """By position, by keyword, its default, through `obj.m` (self given); where the call does not
    show it (`*args`, a name bound by `functools.partial`), what every call passes."""
    graph = _graph(
        tmp_path,
        {
            "t.py": """
                from functools import partial

                def a(): pass
                def b(): pass
                def c(): pass
                def d(): pass
                def wrap(x, f=d):
                    return f
                class K:
                    def m(self, f):
                        return f
                def by_position():
                    wrap(1, a)()
                def by_keyword():
                    wrap(1, f=b)()
                def by_default():
                    wrap(1)()
                def through_an_attribute():
                    K().m(c)()
                def bound_by_partial():
                    w = partial(wrap, 1)
                    w(a)()
                def starred(*args):
                    wrap(*args)()
            """,
        },
    )
    assert graph["t.by_position"] == ["t.a", "t.wrap"]
    assert graph["t.by_keyword"] == ["t.b", "t.wrap"]
    assert graph["t.by_default"] == ["t.d", "t.wrap"]
    assert graph["t.through_an_attribute"] == ["t.K.m", "t.c"]
    assert graph["t.bound_by_partial"] == graph["t.starred"] == ["t.a", "t.b", "t.d", "t.wrap"]


def test_raise_and_for_run_the_class_methods(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "it.py": """
                class Stop(Exception):
                    def __init__(self):
                        pass
                class Countdown:
                    def __iter__(self):
                        return self
                    def __next__(self):
                        raise Stop
                for tick in Countdown():
                    pass
            """,
        },
    )
    assert graph["it"] == ["it.Countdown.__iter__", "it.Countdown.__next__"]
    assert graph["it.Countdown.__next__"] == ["it.Stop.__init__"]


def test_the_command_prints_the_graph_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, {"main.py": "def go():\n    pass\n\ngo()\n"})
    assert main(["callgraph", root, "--output-format", "pycg"]) == 0
    assert json.loads(capsys.readouterr().out) == {"main": ["main.go"], "main.go": []}


def test_the_command_names_a_path_that_is_no_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["callgraph", str(tmp_path / "missing")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "missing: not a directory" in error


def test_a_file_that_cannot_be_parsed_is_named_and_the_others_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, {"good.py": "def go():\n    pass\n\ngo()\n", "bad.py": "def (:\n"})
    assert main(["callgraph", root]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["good"] == ["good.go"]
    assert captured.err.count("\n") == 1 and "bad.py: cannot be read or parsed as Python" in captured.err


def test_registries_tell_constant_keys_apart(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "reg.py": """
                def plain():
                    pass
                def fancy():
                    pass
                def other():
                    pass
                table = {"mode": plain, "extra": other}
                table["more"] = fancy
                table["mode"]()
                handlers = [plain, other]
                handlers[1]()
            """,
        },
    )
    assert graph["reg"] == ["reg.other", "reg.plain"]


@pytest.mark.parametrize("callers", [_CALLER_FILES, _CALLER_FILES + 1])
def test_a_parameter_is_followed_back_to_the_calls_of_a_bounded_number_of_files(tmp_path: Path, callers: int) -> None:
    """The graph's work is the hand-off search's: a parameter is what the calls pass in at most
    `_CALLER_FILES` other files (a function called from more is not followed back)."""
    files = {
        "engine.py": "def drive(step):\n    return step()\n",
        "user0.py": "from engine import drive\n\n\ndef forward():\n    pass\n\n\ndrive(forward)\n",
    }
    files.update({f"user{k}.py": "from engine import drive\n\ndrive(None)\n" for k in range(1, callers)})
    expected = ["user0.forward"] if callers <= _CALLER_FILES else []
    assert _graph(tmp_path, files)["engine.drive"] == expected


def test_a_function_called_in_too_many_files_is_followed_back_through_those_that_may_import_it(tmp_path: Path) -> None:
    """More than `_CALLER_FILES` files call a function of that name, each project of the tree its own (LLaMA-Adapter's
    `train_one_epoch(`): those naming neither its module nor a folder holding it cannot import it, and the rest
    are followed."""
    files = {
        "engine.py": "def drive(step):\n    return step()\n",
        "user0.py": "from engine import drive\n\n\ndef forward():\n    pass\n\n\ndrive(forward)\n",
    }
    own = "def drive(step):\n    return step()\n\n\ndef forward():\n    pass\n\n\ndrive(forward)\n"
    files.update({f"other{k}/run.py": own for k in range(_CALLER_FILES + 1)})
    graph = _graph(tmp_path, files)
    assert graph["engine.drive"] == ["user0.forward"]
    assert graph["other0.run.drive"] == ["other0.run.forward"]


def test_a_model_picked_from_a_registry_of_classes_runs_their_forward(tmp_path: Path) -> None:
    """`MODELS[name]()` is an instance of each class the dict holds (under a constant key, that one's), and calling
    it runs its `forward`; a class no registry holds is not one of them."""
    graph = _graph(
        tmp_path,
        {
            "models.py": """
                class A:
                    def forward(self, x):
                        pass
                class B:
                    def forward(self, x):
                        pass
                class C:
                    def forward(self, x):
                        pass
                MODELS = {"a": A, "b": B}
                def run(name, x):
                    model = MODELS[name]()
                    model(x)
                def run_b(x):
                    model = MODELS.get("b")()
                    model(x)
            """,
        },
    )
    assert graph["models.run"] == ["models.A.forward", "models.B.forward"]
    assert graph["models.run_b"] == ["models.B.forward"]


def test_defaults_star_imports_registries_passed_in_and_aliases_called(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "ops.py": "def mean():\n    pass\n\ndef total():\n    pass\n",
            "run.py": """
                from ops import *

                def apply(fn=mean):
                    fn()

                def pick(table):
                    table["sum"]()

                def drive(step):
                    step()

                go = drive
                go(total)
                apply()
                TABLE = {"sum": total, "avg": mean}
                pick(TABLE)
            """,
        },
    )
    assert graph["run.apply"] == ["ops.mean"]
    assert graph["run.pick"] == ["ops.total"]
    assert graph["run.drive"] == ["ops.total"]
    assert graph["run"] == ["run.apply", "run.drive", "run.pick"]


def test_a_name_is_its_last_assignment_before_the_use_in_straight_line_code(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def first(): pass
                def second(): pass
                def third(): pass
                run = first
                run = second
                run()
                run = third
                def later():
                    run()
                pick = second
                if later:
                    pick = third
                pick()
            """
        },
    )
    # `run()` at module level: only `second` (the last before it); in `later`, run after the module's
    # code, any; `pick` is bound in a branch: either.
    assert graph["app"] == ["app.second", "app.third"]
    assert graph["app.later"] == ["app.first", "app.second", "app.third"]


def test_a_dict_read_in_straight_line_code_holds_the_last_store_of_each_key(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def first(): pass
                def second(): pass
                def third(): pass
                table = {"a": first, "b": first}
                table["a"] = second
                table["a"]()
                table.update({"b": third})
                table["b"]()
                def later():
                    table["a"]()
            """
        },
    )
    # At module level, `table["a"]` is `second` (stored over `first`) and `table["b"]` is `third`
    # (`update`, after the first read); in `later`, run after the module's code, any store.
    assert graph["app"] == ["app.second", "app.third"]
    assert graph["app.later"] == ["app.first", "app.second"]


def test_a_decorated_def_is_what_its_decorators_return(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                import functools
                def outer(f):
                    def wrapper():
                        return f()
                    return wrapper
                def passing(f):
                    f()
                    return f
                @outer
                @passing
                def work(): pass
                @functools.lru_cache
                def cached(): pass
                def run():
                    work()
                    cached()
            """
        },
    )
    # `work` is `outer`'s wrapper, which calls what `passing` returned: `work` itself, which
    # `passing` calls too; a decorator not of the project leaves the def as it is.
    assert graph["app.run"] == ["app.cached", "app.outer.wrapper"]
    assert graph["app.outer.wrapper"] == ["app.work"]
    assert graph["app.passing"] == ["app.work"]


def test_a_class_through_an_assigned_name_or_nested_in_another(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                class Outer:
                    class Inner(Exception):
                        def __init__(self): pass
                        def run(self): pass
                class Sub(Outer.Inner):
                    pass
                Kind = Outer
                def make():
                    Kind.Inner().run()
                def fail():
                    raise Outer.Inner
                def derived():
                    Sub().run()
            """
        },
    )
    assert graph["app.make"] == ["app.Outer.Inner.__init__", "app.Outer.Inner.run"]
    assert graph["app.fail"] == ["app.Outer.Inner.__init__"]
    assert graph["app.derived"] == ["app.Outer.Inner.__init__", "app.Outer.Inner.run"]


def test_a_registry_read_under_a_parameter_every_call_passes_a_constant_for(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def first(): pass
                def second(): pass
                def third(): pass
                def pick(key, other="b"):
                    fns[key]()
                    table[other]()
                def any_of(key):
                    fns[key]()
                fns = [first, second, third]
                table = {"a": first, "b": second, "c": third}
                pick(1)
                pick(1, "a")
                any_of(len(fns))
            """
        },
    )
    # `key` is 1 and `other` "b" (its default) or "a"; `any_of`'s key is no constant: any.
    assert graph["app.pick"] == ["app.first", "app.second"]
    assert graph["app.any_of"] == ["app.first", "app.second", "app.third"]


def test_map_and_filter_call_the_functions_passed_unless_the_project_binds_the_name(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def double(x): return 2 * x
                def keep(x): return x
                def run(xs):
                    return list(filter(keep, map(double, xs)))
            """,
            "other.py": """
                def map(f, xs): return xs
                def double(x): return 2 * x
                def run(xs):
                    return map(double, xs)
            """,
        },
    )
    assert graph["app.run"] == ["app.double", "app.keep"]
    assert graph["other.run"] == ["other.map"]


def test_a_for_target_is_an_element_of_what_is_iterated(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def first(): pass
                def second(): pass
                def third(): pass
                def produce():
                    yield first
                class Steps:
                    def __iter__(self):
                        return self
                    def __next__(self):
                        return second
                def run():
                    for f in produce():
                        f()
                    for g in Steps():
                        g()
                    [h() for h in (third,)]
            """
        },
    )
    assert graph["app.run"] == [
        "app.Steps.__iter__",
        "app.Steps.__next__",
        "app.first",
        "app.produce",
        "app.second",
        "app.third",
    ]


def test_a_function_passed_through_a_parameter_gets_what_that_parameter_is_called_with(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def leaf(): pass
                def calls_it(g):
                    g()
                def apply(fn, arg):
                    fn(arg)
                apply(calls_it, leaf)
            """
        },
    )
    # `calls_it` is never called by name: `apply` calls it as `fn`, passing `leaf` as `g`.
    assert graph["app.calls_it"] == ["app.leaf"]
    assert graph["app.apply"] == ["app.calls_it"]


def test_an_instance_passed_as_a_parameter_is_of_the_class_the_callers_make(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                class Steps:
                    def __iter__(self):
                        return self
                    def __next__(self):
                        raise StopIteration
                    def reset(self): pass
                def walk(steps):
                    steps.reset()
                    for _ in steps:
                        pass
                walk(Steps())
            """
        },
    )
    assert graph["app.walk"] == ["app.Steps.__iter__", "app.Steps.__next__", "app.Steps.reset"]


def test_a_lambda_parameter_is_what_the_calls_of_its_names_pass(tmp_path: Path) -> None:
    graph = _graph(
        tmp_path,
        {
            "app.py": """
                def first(): pass
                def second(): pass
                call = lambda f: f()
                call(first)
                def run():
                    again = lambda g: g()
                    again(second)
            """
        },
    )
    assert graph["app.<lambda1>"] == ["app.first"]
    assert graph["app.run.<lambda1>"] == ["app.second"]


# Each resolution shape: the project's files, a function of it, the names its calls run.
SHAPES = {
    "an import from a module the project does not ship, by its import name": (
        {"main.py": "import numpy as np\nfrom outside.io import load as read\n\nread(np.linalg.norm(1))\n"},
        "main",
        ["numpy.linalg.norm", "outside.io.load"],
    ),
    "a method of an instance of an outside class": (
        {"main.py": "from store import Client\n\nclient = Client('url')\nclient.fetch()\n"},
        "main",
        ["store.Client", "store.Client.fetch"],
    ),
    "an outside function passed as a parameter and called there": (
        {"main.py": "from scheduler import pick\n\ndef run(step):\n    step()\n\nrun(pick.get)\n"},
        "main.run",
        ["scheduler.pick.get"],
    ),
    "an outside base's __init__ and its members a class of the project lacks": (
        {
            "main.py": """
                from outside.nn import Module

                class Net(Module):
                    def go(self):
                        self.zero_grad()

                Net().go()
            """
        },
        "main",
        ["main.Net.go", "outside.nn.Module.__init__"],
    ),
    "the outside base's member, called in a method of the class": (
        {
            "main.py": "from outside.nn import Module\n\nclass Net(Module):\n    def go(self):\n        self.zero_grad()\n"
        },
        "main.Net.go",
        ["outside.nn.Module.zero_grad"],
    ),
    "the standard library's calls are no package's": (
        {"main.py": "import os\nfrom functools import partial\n\npartial(print, os.path.join('a'))\n"},
        "main",
        [],
    ),
    "a name the project ships is no outside call, though it does not define it": (
        {"main.py": "from local import missing\n\nmissing()\n", "local.py": "VALUE = 1\n"},
        "main",
        [],
    ),
    "self.attr stored from a parameter of __init__: an instance of what the callers pass": (
        {
            "main.py": """
                class Engine:
                    def start(self):
                        pass

                class Car:
                    def __init__(self, engine):
                        self.engine = engine

                    def drive(self):
                        self.engine.start()

                Car(Engine()).drive()
            """
        },
        "main.Car.drive",
        ["main.Engine.start"],
    ),
    "map's elements: what the function passed returns": (
        {
            "main.py": """
                def make(n):
                    def step():
                        return n
                    return step

                steps = map(make, [1, 2])
                for s in steps:
                    s()
            """
        },
        "main",
        ["main.make", "main.make.step"],
    ),
    "a dict a function returns, indexed": (
        {
            "main.py": """
                def a():
                    pass

                def b():
                    pass

                def table():
                    hooks = {"a": a, "b": b}
                    return hooks

                t = table()
                t["a"]()
            """
        },
        "main",
        ["main.a", "main.table"],
    ),
    "a dict nested in a dict, the last store under both keys read": (
        {
            "main.py": """
                def a():
                    pass

                def b():
                    pass

                hooks = {"pre": {"x": a}}
                hooks["pre"]["x"] = b
                hooks["pre"]["x"]()
            """
        },
        "main",
        ["main.b"],
    ),
    "a nested store in a branch: the display's and the store's": (
        {
            "main.py": """
                def a():
                    pass

                def b():
                    pass

                hooks = {"pre": {"x": a}}
                if hooks:
                    hooks["pre"]["x"] = b
                hooks["pre"]["x"]()
            """
        },
        "main",
        ["main.a", "main.b"],
    ),
    "a list nested in a list": (
        {"main.py": "def a():\n    pass\n\ndef b():\n    pass\n\nfs = [[a], b]\nfs[0][0]()\n"},
        "main",
        ["main.a"],
    ),
    "a list indexed by a constant imported from a module of the project": (
        {
            "main.py": "from config import WHICH\n\ndef a():\n    pass\n\ndef b():\n    pass\n\nfs = [a, b]\nfs[WHICH]()\n",
            "config.py": "WHICH = 1\n",
        },
        "main",
        ["main.b"],
    ),
    "a key a function assigns is no module constant": (
        {
            "main.py": """
                WHICH = 1

                def a():
                    pass

                def b():
                    pass

                def pick():
                    global WHICH
                    WHICH = 0

                fs = [a, b]
                fs[WHICH]()
            """
        },
        "main",
        ["main.a", "main.b"],
    ),
    "a call's result called with a function it gives back": (
        {
            "main.py": """
                def step():
                    pass

                def passthrough(f):
                    return f

                def pick():
                    return passthrough

                pick()(step)()
            """
        },
        "main",
        ["main.passthrough", "main.pick", "main.step"],
    ),
    "a factory returning what another factory returns": (
        {
            "main.py": """
                def step():
                    pass

                def inner():
                    return step

                def outer():
                    return inner()

                outer()()
            """
        },
        "main",
        ["main.outer", "main.step"],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_resolution_shapes(tmp_path: Path, shape: str) -> None:
    files, function, expected = SHAPES[shape]
    assert _graph(tmp_path, files)[function] == expected
