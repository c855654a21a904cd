"""The house plan holds: no import cycles, floors one-way, docs that list every module.

The import graph is read from the source (every ``import`` / ``from ... import`` statement,
function-local ones included, with ``networkx``); a ``from P import name`` is an edge to the
module ``P.name`` when that is a module of ours, else to ``P``. Imports under ``if
TYPE_CHECKING:`` are for annotations only and never run, so they are left out.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rasp", "rasp_model", "tasks", "compiler", "analysis", "rasp_cli")

#: which group may import which (a group: a top-level package, a subpackage of analysis, or one
#: of the language's three rooms). The floors, bottom up: the language core (``rasp``: IR, ops,
#: interpreter, parser, values, errors, limits, ...) < its analyses (``rasp.analyses``) < its
#: REPL front end (``rasp.repl``) < the package's public API (``rasp/__init__.py``, the group
#: ``rasp.__init__``) < rasp_model (the one Transformer; only rasp.errors of ours) < tasks <
#: compiler < analysis.training < analysis.probing < analysis.evidence < analysis.prediction,
#: analysis.experiment (beside it) < analysis.reporting < rasp_cli.
RASP = {"rasp", "rasp.analyses", "rasp.repl", "rasp.__init__"}
ALLOWED = {
    "rasp": set(),
    "rasp.analyses": {"rasp"},
    "rasp.repl": {"rasp", "rasp.analyses"},
    "rasp.__init__": {"rasp", "rasp.analyses", "rasp.repl"},
    "rasp_model": {"rasp"},
    "tasks": RASP,
    "compiler": RASP | {"rasp_model"},
    "analysis": set(),
    "analysis.training": RASP | {"rasp_model", "tasks"},
    "analysis.probing": RASP | {"rasp_model", "tasks", "compiler", "analysis.training"},
    "analysis.evidence": RASP | {"rasp_model", "tasks", "analysis.training", "analysis.probing"},
    # a prediction is made from programs before any run: no evidence room, no grid (the
    # check against runs is a job of analysis.experiment, validate.py)
    "analysis.prediction": RASP | {"rasp_model", "tasks", "compiler", "analysis.training"},
    "analysis.experiment": RASP | {"rasp_model", "tasks", "compiler", "analysis.training",
                                   "analysis.probing", "analysis.evidence",
                                   "analysis.prediction"},
    "analysis.reporting": RASP | {"rasp_model", "tasks", "compiler", "analysis.training",
                                  "analysis.probing", "analysis.evidence", "analysis.prediction",
                                  "analysis.experiment"},
    "rasp_cli": RASP | {"rasp_model", "tasks", "compiler", "analysis.training",
                        "analysis.probing", "analysis.evidence", "analysis.prediction",
                        "analysis.experiment", "analysis.reporting"},
}

#: a module longer than this says why at the top of its docstring (a line "Size: ...")
MAX_LINES = 900


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of our packages."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def import_edges(mods: dict[str, Path]) -> list[tuple[str, str]]:
    """(importer, imported) pairs between our modules."""

    def ours(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges = []
    for name, f in mods.items():
        tree = ast.parse(f.read_text(), filename=str(f))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [ours(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else ours(mod)
                           for a in node.names]
            edges += [(name, t) for t in targets if t and t != name]
    return edges


def group(module: str) -> str:
    """The floor group of a module: ``analysis.<room>``, ``rasp.repl``, ``rasp.analyses``,
    ``rasp.__init__`` (the package module ``rasp`` itself: the public API), ``rasp`` (the
    language core), else the top-level package."""
    parts = module.split(".")
    if parts[0] == "analysis" and len(parts) > 1:
        return ".".join(parts[:2])
    if parts[0] == "rasp":
        if len(parts) == 1:
            return "rasp.__init__"
        if parts[1] in ("repl", "analyses"):
            return "rasp." + parts[1]
    return parts[0]


def floor_violations(edges) -> list[str]:
    """``"a -> b"`` for every import edge between groups that the floors table forbids."""
    return sorted({f"{a} -> {b}" for a, b in edges
                   if group(a) != group(b) and group(b) not in ALLOWED[group(a)]})


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    mods = modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    g.add_edges_from(import_edges(mods))
    return g


def test_the_graph_sees_imports():
    """The reader finds known edges of every kind (absolute, relative, function-local)."""
    edges = set(import_edges(modules()))
    assert ("rasp.repl.session", "rasp.repl.runtime") in edges               # relative, from . import
    assert ("analysis.training.grid", "analysis.training.trainer") in edges   # from P import m
    assert ("rasp_cli.commands.train", "analysis.training.trainer") in edges  # function-local
    assert ("rasp.ops", "rasp.ir") not in edges                    # TYPE_CHECKING only


def test_no_module_cycles(graph):
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:10])


def test_floors_are_one_way(graph):
    bad = floor_violations(graph.edges())
    assert not bad, "upward or sideways imports: " + "; ".join(bad)
    groups = nx.DiGraph((group(a), group(b)) for a, b in graph.edges() if group(a) != group(b))
    assert nx.is_directed_acyclic_graph(groups)


#: the one command-line module that starts training itself (``rasp train --grid``, ``rasp
#: sweep``: ``rasp_cli.common.run_grid_from_args``, after the commands planned their runs
#: through ``analysis.experiment.plan``); ``rasp curve``, ``rasp validate-predictor`` and ``rasp
#: replicate`` train through the experiment's pipeline and take its error type from there
CLI_GRID = {"rasp_cli.common"}


def grid_importers_outside(edges) -> list[str]:
    """``"a -> analysis.training.grid"`` for every module that imports training's grid runner
    and is neither in training, nor in the experiment's room (``analysis.experiment``: plan,
    pipeline and its jobs), nor one of :data:`CLI_GRID`."""
    return sorted(f"{a} -> {b}" for a, b in edges
                  if b == "analysis.training.grid"
                  and group(a) not in ("analysis.training", "analysis.experiment")
                  and a not in CLI_GRID)


def test_only_the_experiment_s_jobs_train(graph):
    """Training's grid is imported by training itself, by the experiment's room
    (``analysis.experiment``: the plan, the pipeline and the jobs on it: the report's runs,
    curves, the predictor's check, the replication) and by the command line where it trains or
    names the grid's error: the report and the predictions doc train through the pipeline and
    take its error type from there, with no exception (issue 48)."""
    bad = grid_importers_outside(graph.edges())
    assert not bad, "training outside the experiment room: " + "; ".join(bad)


@pytest.mark.parametrize("edge", [
    ("analysis.reporting.report", "analysis.training.grid"),
    ("analysis.reporting.predictions_doc", "analysis.training.grid"),
    ("analysis.prediction.predict", "analysis.training.grid"),
    ("rasp_cli.commands.report", "analysis.training.grid"),
    ("rasp_cli.commands.curve", "analysis.training.grid"),
    ("rasp_cli.commands.validate_predictor", "analysis.training.grid"),
    ("rasp_cli.commands.replicate", "analysis.training.grid"),
    ("rasp_cli.commands.train", "analysis.training.grid"),
])
def test_the_grid_rule_fails_on_a_new_importer(edge):
    """The rule is not vacuous: each of these imports, were it written, is refused."""
    assert grid_importers_outside([edge]) == [" -> ".join(edge)]


def test_a_prediction_needs_no_run(graph):
    """The prediction room makes predictions from programs before any run: of training it may
    read the settings (``analysis.training.configs``, the protocol's lengths) and nothing that
    trains or reads runs (the grid, the trainer, run directories); checking a prediction
    against runs is a job of ``analysis.experiment`` (issue 48)."""
    bad = sorted(f"{a} -> {b}" for a, b in graph.edges()
                 if group(a) == "analysis.prediction" and group(b) == "analysis.training"
                 and b != "analysis.training.configs")
    assert not bad, "the prediction room reaches into training: " + "; ".join(bad)


@pytest.mark.parametrize("edge", [
    ("rasp.ir", "rasp.repl.display"),              # the core imports its REPL front end
    ("rasp.interpreter", "rasp.analyses.value_sets"),  # the core imports an analysis
    ("rasp.analyses.raspl", "rasp.repl.display"),  # an analysis imports the REPL front end
    ("rasp.repl.session", "rasp"),                 # the front end imports the public API
    ("rasp.analyses.measures", "compiler.compile"),  # the language imports the compiler
    ("rasp.ir", "tasks"),
    ("compiler.graph.lowering", "analysis.training.trainer"),
])
def test_the_floors_check_fails_on_a_wrong_import(edge):
    """The check is not vacuous: each of these imports, were it written, is refused."""
    assert floor_violations([edge]) == [" -> ".join(edge)]


#: what ``import rasp`` must not load: the REPL front end and the parser's grammar library
LANGUAGE_ALONE = ("import {mod}, sys; loaded = [m for m in ('rasp.repl', 'rasp.parser', 'lark') "
                  "if m in sys.modules]; assert not loaded, loaded")


@pytest.mark.parametrize("mod", ["rasp", "rasp.ir"])
def test_the_language_loads_alone(mod):
    """``import rasp`` (and ``import rasp.ir``, which runs ``rasp/__init__.py``) loads the
    language core, not its REPL (``rasp.repl``: sessions, drawing, display) nor the parser and
    lark: those load when a public name asks for them (``rasp.Session``, ``rasp.draw``, ...)."""
    out = subprocess.run([sys.executable, "-c", LANGUAGE_ALONE.format(mod=mod)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_public_api_imports_the_repl_only_lazily():
    """Every module-level import of ``rasp/__init__.py`` of ours stays in the language core's
    floors (``rasp``, ``rasp.analyses``); the REPL is reached in a function (the lazy
    attributes)."""
    tree = ast.parse((ROOT / "rasp" / "__init__.py").read_text())
    targets = [("rasp." if n.level else "") + (n.module or "")
               for n in tree.body if isinstance(n, ast.ImportFrom)]
    targets += [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    ours = [t for t in targets if t.split(".")[0] in PACKAGES]
    assert ours and all(group(t) in ("rasp", "rasp.analyses") for t in ours), ours


def test_the_language_rooms_are_groups():
    assert [group(m) for m in ("rasp", "rasp.ir", "rasp.repl.session", "rasp.repl",
                               "rasp.analyses.crasp", "analysis.training.grid")] == [
        "rasp.__init__", "rasp", "rasp.repl", "rasp.repl", "rasp.analyses", "analysis.training"]


def test_no_subcommand_imports_another(graph):
    """A command module of ``rasp_cli/commands/`` imports no other command and not
    ``rasp_cli.main``: what commands share is in ``rasp_cli.common``."""
    bad = sorted(f"{a} -> {b}" for a, b in graph.edges()
                 if a.startswith("rasp_cli.commands.")
                 and (b.startswith("rasp_cli.commands.") or b == "rasp_cli.main"))
    assert not bad, bad


def test_rasp_model_uses_only_the_error_root(graph):
    """The one Transformer imports nothing of ours but the error root (``rasp.errors``)."""
    outside = {b for a, b in graph.edges() if group(a) == "rasp_model" and group(b) != "rasp_model"}
    assert outside <= {"rasp.errors"}, outside


def test_every_module_is_in_the_architecture_doc():
    """docs/architecture.md names every module (by file name in its package's table) and
    names no module that does not exist."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    mods = modules()
    missing = [str(f.relative_to(ROOT)) for f in mods.values()
               if f.name != "__init__.py" and f.relative_to(ROOT).as_posix() not in doc
               and f"`{f.name}`" not in doc]
    assert not missing, f"modules missing from docs/architecture.md: {missing}"
    for path in re.findall(r"`((?:rasp|rasp_model|tasks|compiler|analysis|rasp_cli)/[\w/]+\.py)`",
                           doc):
        assert (ROOT / path).exists(), f"docs/architecture.md names {path}, which does not exist"
    for pkg in {group(m) for m in mods} - {"rasp.__init__"}:
        assert f"`{pkg.replace('.', '/')}/`" in doc, f"package {pkg} not in docs/architecture.md"


def test_readme_layout_lists_the_packages():
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    for pkg in PACKAGES + ("tests", "bench", "docs"):
        assert f"`{pkg}/`" in layout, f"README's layout does not list {pkg}/"


def test_long_modules_say_why():
    long = []
    for name, f in modules().items():
        n = len(f.read_text().splitlines())
        if n > MAX_LINES:
            doc = ast.get_docstring(ast.parse(f.read_text())) or ""
            if not any(line.startswith("Size:") for line in doc.splitlines()):
                long.append(f"{f.relative_to(ROOT)} ({n} lines)")
    assert not long, f"modules over {MAX_LINES} lines without a 'Size:' reason: {long}"


def test_a_users_model_py_does_not_shadow_the_toolkit(tmp_path):
    """A researcher's own ``model.py`` (or ``session.py``) in the working directory must not
    break ``from compiler import compile_program`` (the Transformer's package is
    ``rasp_model``, not the generic ``model``)."""
    import subprocess
    import sys
    (tmp_path / "model.py").write_text("raise ImportError('the user model.py was imported')\n")
    (tmp_path / "session.py").write_text("raise ImportError('the user session.py')\n")
    code = ("from compiler import compile_program\nimport rasp\n"
            "m = compile_program(rasp.run_source('x = tokens;')['x'], vocab=['a'], "
            "max_seq_len=2)\nprint(m.run(['a'])[0])")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "['a']"


def test_the_rasp_command_ignores_a_users_modules_in_the_working_directory(tmp_path):
    """The ``rasp`` console script, run from a directory holding a user's own ``tasks.py``,
    ``analysis.py``, ``compiler.py`` and ``rasp_model.py`` (each raises when imported), imports
    the toolkit's packages, not those files: its entry point puts its own directory on
    ``sys.path``, never the working directory. ``rasp compile`` imports ``compiler``,
    ``analysis`` (the verification budget) and ``tasks``; ``rasp tasks`` the catalogue. The
    same files do shadow the packages for ``python -c`` there (the README says so; checked
    here too, so this test cannot pass by never reading the files)."""
    import subprocess
    import sys
    script = Path(sys.executable).with_name("rasp")
    if not script.exists():
        pytest.skip("the rasp console script is not installed in this environment")
    for name in ("tasks", "analysis", "compiler", "rasp_model"):
        (tmp_path / f"{name}.py").write_text(
            f"raise ImportError('the user {name}.py was imported')\n")
    (tmp_path / "prog.rasp").write_text("x = tokens;\n")
    env = {"PATH": str(script.parent), "HOME": str(tmp_path)}
    for argv in (["tasks"], ["compile", "prog.rasp", "--name", "x", "--vocab", "a,b", "--max-len", "2",
                             "-o", "out"]):
        p = subprocess.run([str(script), *argv], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=env)
        assert p.returncode == 0, (argv, p.stderr[-2000:])
        assert "was imported" not in p.stdout + p.stderr
    shadowed = subprocess.run([sys.executable, "-c", "import tasks"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env=env)
    assert "the user tasks.py was imported" in shadowed.stderr
