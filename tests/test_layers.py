"""The package's layers: imports point one way, mjcf -> physics -> envs -> rl -> viz and runs -> cli and bench
(models below envs and rl), and every registered task builds from its package's `TASK`."""

import ast
import pathlib

import pytest

from boxjax import envs

ROOT = pathlib.Path(__file__).resolve().parent.parent / "boxjax"
LAYERS = {
    "boxjax": 0,
    "boxjax.ranges": 0,
    "boxjax.platform": 0,
    "boxjax.mjcf": 1,
    "boxjax.physics": 2,
    "boxjax.models": 2,
    "boxjax.envs": 3,
    "boxjax.rl": 4,
    "boxjax.viz": 5,
    "boxjax.runs": 5,
    "boxjax.cli": 6,
    "boxjax.bench": 6,
    "boxjax.__main__": 6,
}
"""A module may import modules of its own layer or a lower one."""


def _layer(module: str) -> int:
    """The layer of a `boxjax...` module: that of its longest listed prefix."""
    if module == "boxjax":
        return LAYERS[module]
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    raise AssertionError(f"{module} is in no layer")


def _imports(path: pathlib.Path) -> set[str]:
    """The boxjax modules a file imports (module-level and inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m == "boxjax" or m.startswith("boxjax.")}


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_imports_point_one_way():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        here = _module(path)
        for imported in _imports(path):
            # `from boxjax.envs import X` also yields "boxjax.envs.X": judge the deepest name that is a module
            if _layer(imported) > _layer(here):
                wrong.append(f"{here} imports {imported}")
    assert not wrong, "\n".join(wrong)


BACKEND_MODULES = ("boxjax.physics.mjx", "boxjax.physics.cpu")
"""The physics engines: a task reaches them only through the backend it receives (`physics.backend`)."""


def test_no_task_imports_a_physics_engine():
    wrong = []
    for name in envs.TASKS:
        package = ROOT / "envs" / envs.REGISTRY[name].split(".")[-1]
        files = sorted(package.rglob("*.py")) if package.is_dir() else [package.with_suffix(".py")]
        assert files and all(f.exists() for f in files), f"no source found for task {name!r}"
        for path in files:
            wrong += [f"{_module(path)} imports {m}" for m in _imports(path) if m.startswith(BACKEND_MODULES)]
    assert not wrong, "\n".join(wrong)


def test_the_learner_imports_no_task_and_no_engine():
    """`boxjax.rl` trains any environment: it imports no task package and no physics module (an engine's
    figures reach it through the environment, `boxjax.envs.base.host_figures`; a task's way to start from
    another task's model through its `model_adapters`)."""
    forbidden = ("boxjax.physics", *(envs.REGISTRY[name] for name in envs.TASKS))
    wrong = []
    for path in sorted((ROOT / "rl").rglob("*.py")):
        wrong += [f"{_module(path)} imports {m}" for m in _imports(path) if m.startswith(forbidden)]
    assert not wrong, "\n".join(wrong)
    assert "boxjax.envs.stance" in forbidden and "boxjax.envs.block" in forbidden


def test_the_engine_figure_names_agree():
    from boxjax.physics import graphs
    from boxjax.rl import loop

    assert loop.GRAPH_CAPTURES == graphs.GRAPH_CAPTURES


def test_a_layer_violation_would_be_found():
    assert _layer("boxjax.rl.ppo") > _layer("boxjax.envs.walk.teacher") > _layer("boxjax.models.checkpoint")
    with pytest.raises(AssertionError, match="in no layer"):
        _layer("boxjax.newpackage.x")


@pytest.mark.parametrize("name", envs.TASKS)
def test_every_registered_task_has_its_config_and_env(name):
    spec = envs.task(name)
    assert isinstance(spec, envs.Task) and callable(spec.env)
    if spec.config is not None:
        budget = spec.config().contact_budget()
        assert budget.ncon_per_world > 0 and budget.njmax > 0


def test_unknown_task_is_named():
    with pytest.raises(ValueError, match="unknown task 'box'; valid: stance, block, walk, reach"):
        envs.make("box")


def test_one_place_lists_what_each_body_needs_and_names_what_is_missing(monkeypatch, tmp_path):
    from boxjax import mjcf
    from boxjax.envs import bodies
    from boxjax.envs.walk import teacher

    for body in mjcf.BODIES:
        n = bodies.needs(body)
        assert n.missing() == [], f"{body}: {n.missing()}"
        assert n.block.ncon_per_world > n.alone.ncon_per_world and n.block.njmax > n.alone.njmax
    monkeypatch.setattr(teacher, "SHIPPED_DIR", str(tmp_path))
    assert bodies.needs("simple").missing() == [
        "no shipped walking teacher (block --teacher auto distils none)"
    ]
    with pytest.raises(ValueError, match="unknown body 'giant'"):
        bodies.needs("giant")
    assert "| muscular |" in bodies.table()


def _experiments_references(source: str, name: str) -> list[str]:
    """String literals in a file's code (not its docstrings) that name the experiments/ folder."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        f"{name}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (node.value == "experiments" or node.value.startswith("experiments/"))
    ]


def test_tests_and_the_package_use_the_package_not_the_experiments_scripts():
    """The commands live in `boxjax.cli` and `boxjax.bench`; `experiments/` holds thin wrappers of them that
    nothing here imports or runs."""
    files = sorted(ROOT.rglob("*.py")) + sorted((ROOT.parent / "tests").glob("*.py"))
    files = [f for f in files if f.resolve() != pathlib.Path(__file__).resolve()]
    wrong = [ref for path in files for ref in _experiments_references(path.read_text(), path.name)]
    assert not wrong, "\n".join(wrong)
    planted = '"""Runs experiments/block.py."""\nimport os\nos.path.join("x", "experiments")\n'
    assert _experiments_references(planted, "planted.py") == ["planted.py:3 'experiments'"]


LONGEST_BENCH_FUNCTION = 60
"""Lines a function of `boxjax.bench` may span, its `def` line to its last (the house style's ≲ 60)."""


def _long_functions(folder: pathlib.Path, most: int) -> list[str]:
    """ "path:line name (N lines)" of every function or method (nested ones too) under `folder` longer than
    `most` lines."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > most:
                    found.append(
                        f"{path.relative_to(folder.parent)}:{node.lineno} {node.name} ({lines} lines)"
                    )
    return found


def test_no_bench_function_is_longer_than_the_house_style_allows(tmp_path):
    long = _long_functions(ROOT / "bench", LONGEST_BENCH_FUNCTION)
    assert not long, "split these (house style: functions ≲ 60 lines):\n" + "\n".join(long)
    body = "".join(f"    x = {i}\n" for i in range(LONGEST_BENCH_FUNCTION))  # a def line and 60 more
    (tmp_path / "planted.py").write_text(f"def short():\n    pass\n\n\ndef planted():\n{body}")
    assert [entry.split(" ", 1)[1] for entry in _long_functions(tmp_path, LONGEST_BENCH_FUNCTION)] == [
        f"planted ({LONGEST_BENCH_FUNCTION + 1} lines)"
    ]
