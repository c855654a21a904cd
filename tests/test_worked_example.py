"""docs/worked-example.md runs as written: its three commands (a task file -> a registered
prediction -> five seeds per PE in one `rasp train` -> the labelled claim and its plot) are read
from the page and executed in a fresh directory (``tasks/`` linked in; the checkout's ``runs/``
and ``reports/`` never touched), with fewer training steps and smaller search budgets
(:data:`ADDED`) so that the test fits the suite.

What is checked is independent of the code's own output: the registration's sha256 recomputed
from the file as the registration format defines it; the run directories the page promises;
each label recomputed from the prediction and the measured outcome by the rule's definition
(supported = the same decided outcome, contradicted = the other, else inconclusive); the
measured outcome against the per-seed numbers (a decided outcome needs >= 5 seeds on the
right side of the threshold's mean interval); the plot a PNG; and the HTML report's main study
planning exactly the run directories `rasp train` wrote (so `rasp report --demo` reuses them).
"""

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "worked-example.md"
BIN = Path(sys.executable).parent
#: command prefix -> flags the test adds (steps and budgets only; documented in `--help`)
ADDED = {("rasp", "score"): ["--search-budget", "200k", "--crasp-budget", "200k"],
         ("rasp", "train"): ["--steps", "25", "--no-progress"],
         ("rasp", "validate-predictor"): ["--steps", "25"]}


def commands() -> list[list[str]]:
    """The page's ``sh`` block as argv lists, with :data:`ADDED`."""
    text = PAGE.read_text()
    (body,) = re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)
    out = []
    for line in body.splitlines():
        if not line.strip():
            continue
        argv = shlex.split(line, comments=True)
        for prefix, flags in ADDED.items():
            if tuple(argv[:len(prefix)]) == prefix:
                argv = argv + flags
        out.append(argv)
    return out


def test_the_page_names_three_commands_and_the_flags_the_test_adds_exist():
    cmds = commands()
    assert [c[:2] for c in cmds] == [["rasp", "score"], ["rasp", "train"],
                                     ["rasp", "validate-predictor"]]
    for argv in cmds:
        helptext = subprocess.run([str(BIN / "rasp"), argv[1], "--help"], capture_output=True,
                                  text=True, timeout=300).stdout
        for flag in ADDED[tuple(argv[:2])]:
            if flag.startswith("--"):
                assert flag in helptext, (argv[1], flag)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    where = tmp_path_factory.mktemp("worked")
    (where / "tasks").symlink_to(ROOT / "tasks")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "RASP_PROGRESS_EVERY": "600"}
    logs = []
    for argv in commands():
        p = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True,
                           timeout=900, stdin=subprocess.DEVNULL)
        logs.append(p)
        assert p.returncode == 0, (argv, p.stdout[-2000:], p.stderr[-3000:])
    return where, logs


def test_the_registration_is_written_before_the_runs_with_a_checkable_sha256(ran):
    where, logs = ran
    reg = where / "reports" / "more_a_than_b" / "registered.json"
    doc = json.loads(reg.read_text())
    # the registration's hash as its format defines it (analysis/prediction/registered.py's
    # module docstring): canonical JSON without the "sha256" field, sorted keys, no spaces
    body = {k: v for k, v in doc.items() if k != "sha256"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False).encode("utf-8")).hexdigest()
    assert doc["sha256"] == digest
    assert digest in logs[0].stdout
    # the task file's own hash, recomputed here
    src = (ROOT / "tasks" / "examples" / "more_a_than_b.py").read_bytes()
    assert hashlib.sha256(src).hexdigest() in reg.read_text()


def test_one_train_command_writes_five_seeds_per_pe_with_the_theories_protocol(ran):
    where, _ = ran
    root = where / "runs" / "more_a_than_b"
    want = {f"nope/seed{k}-demo" for k in range(5)} | \
        {f"ape_learned/seed{k}-demo_random_offsets" for k in range(5)}
    got = {f"{d.parent.name}/{d.name}" for d in root.glob("*/*") if (d / "DONE").exists()}
    assert got == want
    cfg = json.loads((root / "ape_learned" / "seed0-demo_random_offsets" / "config.json")
                     .read_text())
    assert json.dumps(cfg).count('"position_offsets": "random"') >= 1


def test_each_label_follows_from_the_prediction_and_the_measured_outcome(ran):
    where, logs = ran
    out = json.loads((where / "reports" / "more_a_than_b" / "validation.json").read_text())
    rows = out["rows"]
    assert {r["pe"] for r in rows} == {"nope", "ape_learned"}
    assert "10 reused" in logs[2].stderr or "nothing to train" in logs[2].stderr
    for r in rows:
        assert r["registered"] and not r["in_catalogue"]
        assert len(r["ood_em"]) == 5 and r["seeds"] == [0, 1, 2, 3, 4]
        if r["measured"] in ("generalizes", "fails") and \
                r["prediction"] in ("generalizes", "fails"):
            want = "supported" if r["measured"] == r["prediction"] else "contradicted"
        else:
            want = "inconclusive"
        assert r["label"] == want, r
        oods = r["ood_em"]
        if r["measured"] == "generalizes":
            assert sum(x > r["threshold"] for x in oods) >= 5
        if r["measured"] == "fails":
            assert sum(x < r["threshold"] for x in oods) >= 5
    md = (where / "reports" / "more_a_than_b" / "validation.md").read_text()
    assert md.startswith("Generated by `rasp validate-predictor --registered")
    png = (where / "reports" / "more_a_than_b" / "validation.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_s_main_study_plans_the_runs_train_wrote(ran):
    """`rasp report --demo --task-file F --pe nope,ape_learned` trains nothing: its planned
    run directories are the ones the page's `rasp train` wrote."""
    where, _ = ran
    code = ("from tasks.custom import load_task_file; from tasks.catalogue import register_task; "
            "from analysis.reporting.report import ReportOptions, wanted_runs; "
            "t = register_task(load_task_file('tasks/examples/more_a_than_b.py')); "
            "print('\\n'.join(sorted(str(d) for _, _, d in wanted_runs(t.name, ReportOptions("
            "preset='main', pes=['nope', 'ape_learned'])))))")
    p = subprocess.run([sys.executable, "-c", code], cwd=where, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    planned = {Path(x).relative_to("runs/more_a_than_b").as_posix()
               for x in p.stdout.split()}
    written = {f"{d.parent.name}/{d.name}"
               for d in (where / "runs" / "more_a_than_b").glob("*/*")}
    assert planned == written


def test_the_page_s_sentence_about_its_result_is_the_tool_s_output():
    """docs/worked-example.md restates the labels and intervals of the run it shows: they must
    be those of docs/worked-example/validation.json (what `rasp validate-predictor -o` wrote),
    not numbers copied by hand that could drift."""
    text = PAGE.read_text()
    out = json.loads((ROOT / "docs" / "worked-example" / "validation.json").read_text())
    para = text[text.index("The labels, from `validation.md`"):]
    names = {"nope": "NoPE", "ape_learned": "the learned APE with random offsets"}
    for r in out["rows"]:
        lo, hi = r["ood_ci95"]
        stated = f"{r['ood_mean']:.2f} [{lo:.2f}, {hi:.2f}]"
        i = para.index(f"{names[r['pe']]} predicted *{r['prediction']}*")
        end = para.index("**", para.index("-> **", i) + 5) + 2
        sentence = para[i:end]
        assert stated in sentence and sentence.endswith(f"-> **{r['label']}**"), sentence
    assert (ROOT / "docs" / "worked-example" / "validation.md").read_text().startswith(
        "Generated by `rasp validate-predictor --registered")
