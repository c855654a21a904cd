"""Registrations whose edits show, and predictions that state their conditions (issue 46,
items 4 and 5): one sha256 over a registration, checked (a tampered file is refused with one
line, exit 2); the commit recorded only from a clean tree; no registration of a cell whose runs
exist; when a registration first appeared in git against its runs' creation times; the
protocol a learned APE's prediction assumes in the table, the JSON and the registration; and
``rasp train --pe ape_learned`` without random offsets says so."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.prediction import registered as R

ROOT = Path(__file__).resolve().parent.parent
RASP = [sys.executable, "-m", "rasp_cli.main"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _rasp(args, cwd, timeout=300):
    return subprocess.run(RASP + args, capture_output=True, text=True, cwd=cwd, env=ENV,
                          timeout=timeout)


def _one_line(p, rc=2, words=""):
    assert p.returncode == rc, (p.returncode, p.stderr)
    err = p.stderr.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    assert words.lower() in err.lower(), err


def _git(repo, *args, date=None):
    env = dict(os.environ)
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                    "-c", "commit.gpgsign=false", *args], cwd=repo, env=env, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def registration(tmp_path_factory):
    """``rasp score count --pe nope --pe ape_learned --register r.json`` (shipped programs
    only: about a second) and what it printed."""
    d = tmp_path_factory.mktemp("reg")
    p = _rasp(["score", "count", "--pe", "nope", "--pe", "ape_learned", "--register",
               "r.json"], d)
    assert p.returncode == 0, p.stderr
    return d / "r.json", p.stdout


def test_a_registration_carries_one_sha256_printed_to_publish(registration):
    path, out = registration
    doc = json.loads(path.read_text())
    assert doc["version"] == R.VERSION == 2
    assert doc["sha256"] == R.registration_sha256(doc)
    assert f"sha256 {doc['sha256']}: publish or commit it" in out
    assert R.read_registration(path)["sha256"] == doc["sha256"]
    assert R.hash_status(doc) .startswith(f"sha256 {doc['sha256']} (checked")
    # item 4: the registration names the protocol a learned APE's prediction assumes
    ape = [p for p in doc["predictions"] if p["pe"] == "ape_learned"][0]
    nope = [p for p in doc["predictions"] if p["pe"] == "nope"][0]
    assert ape["assumes"] == {"position_offsets": "random"} and nope["assumes"] is None
    assert "random position offsets" in ape["theory"]


def test_the_hash_covers_every_part_of_a_registration(registration):
    doc = json.loads(registration[0].read_text())
    base = R.registration_sha256(doc)
    for change in (lambda d: d["predictions"][0].__setitem__("prediction", "fails"),
                   lambda d: d["budgets"].__setitem__("raspl", 1),
                   lambda d: d["tasks"][0].__setitem__("source", {"regex": "a*"}),
                   lambda d: d.__setitem__("registered_at", "2000-01-01T00:00:00Z"),
                   lambda d: d["code"].__setitem__("diff_sha256", "0" * 64)):
        d = json.loads(json.dumps(doc))
        change(d)
        assert R.registration_sha256(d) != base
    # the order of keys and the indentation are not part of it
    assert R.registration_sha256(dict(reversed(list(doc.items())))) == base


TAMPER = {
    "an edited prediction": (lambda d: d["predictions"][0].__setitem__("prediction", "fails"),
                             "edited after it was written"),
    "an edited regular expression": (
        lambda d: d["tasks"][0].__setitem__("source", {"regex": "(ab)*", "format": "next_set",
                                                       "alphabet": "ab", "components": None,
                                                       "name": "count"}),
        "edited after it was written"),
    "a removed hash": (lambda d: d.pop("sha256"), "no sha256"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_a_tampered_registration_is_refused_with_one_line(registration, tmp_path, case):
    change, words = TAMPER[case]
    doc = json.loads(registration[0].read_text())
    change(doc)
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc, indent=1))
    p = _rasp(["validate-predictor", "--registered", str(bad), "--runs",
               str(tmp_path / "runs")], tmp_path, timeout=120)
    _one_line(p, 2, words)
    assert not (tmp_path / "runs").exists()            # refused before any training
    with pytest.raises(R.RegisteredError, match=words):
        R.read_registration(bad)


def test_the_published_hash_is_checked(registration, tmp_path):
    path, _ = registration
    sha = json.loads(path.read_text())["sha256"]
    assert R.read_registration(path, expect_sha256=sha.upper())["sha256"] == sha
    p = _rasp(["validate-predictor", "--registered", str(path), "--registered-sha256",
               "0" * 64, "--runs", str(tmp_path / "runs")], tmp_path, timeout=120)
    _one_line(p, 2, "is not the published")
    p = _rasp(["validate-predictor", "--registered-sha256", sha], tmp_path, timeout=120)
    _one_line(p, 2, "--registered FILE.json")


def test_registrations_before_hashes_stay_readable_and_say_so():
    """docs/registered/ was written before hashes (version 1): read as before, reported "not
    checkable"; never checked against a published hash."""
    shipped = sorted((ROOT / "docs" / "registered").glob("*.json"))
    assert shipped
    for f in shipped:
        doc = R.read_registration(f)
        assert doc["version"] == 1 and "sha256" not in doc
        assert R.hash_status(doc) == R.NOT_CHECKABLE
        with pytest.raises(R.RegisteredError, match="not checkable"):
            R.read_registration(f, expect_sha256="0" * 64)


def test_refused_where_the_cell_has_runs(tmp_path):
    run = tmp_path / "runs" / "count" / "nope" / "seed0-quick"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    p = _rasp(["score", "count", "--pe", "nope", "--pe", "ape_learned", "--register",
               "r.json"], tmp_path)
    _one_line(p, 2, "runs already exist")
    assert "count/nope" in p.stderr and str(Path("runs/count/nope/seed0-quick")) in p.stderr
    assert "count/ape_learned" not in p.stderr and not (tmp_path / "r.json").exists()
    assert R.existing_runs(tmp_path / "runs", [("count", None), ("count", "ape_learned"),
                                               ("parity", "nope")]) == \
        {("count", None): [str(run)]}
    # another runs root (where the checks will train): registered
    p = _rasp(["score", "count", "--pe", "nope", "--register", "r.json", "--runs", "other"],
              tmp_path)
    assert p.returncode == 0 and (tmp_path / "r.json").is_file(), p.stderr


def _repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    _git(repo, "add", "code.py")
    _git(repo, "commit", "-q", "-m", "code", date="2026-01-01T00:00:00+00:00")
    return repo


def test_the_commit_is_recorded_only_from_a_clean_tree(tmp_path):
    repo = _repo(tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True).stdout.strip()
    assert R.code_state(repo) == {"state": "clean", "head": head, "diff_sha256": None,
                                  "untracked": 0}
    (repo / "code.py").write_text("x = 2\n")
    diff = subprocess.run(["git", "diff", "--no-ext-diff", "--no-color", "--binary", "HEAD"],
                          cwd=repo, capture_output=True).stdout
    state = R.code_state(repo)
    assert state["state"] == "uncommitted changes" and state["head"] == head
    assert state["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    doc = R.write_registration(tmp_path / "r.json", [], [], {}, repo=repo)
    assert doc["commit"] is None and doc["code"]["state"] == "uncommitted changes"
    assert R.read_registration(tmp_path / "r.json")["sha256"] == doc["sha256"]
    outside = tmp_path / "plain"
    outside.mkdir()
    assert R.code_state(outside)["state"] == "not in git"


def _run(root: Path, name: str, created: str) -> str:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"created": created}))
    return str(d)


def test_provenance_says_when_the_registration_entered_git_against_the_runs(tmp_path):
    repo = _repo(tmp_path)
    reg = repo / "reg.json"
    R.write_registration(reg, [], [], {}, repo=repo)
    runs = tmp_path / "runs"
    early = _run(runs, "early", "2026-02-01T00:00:00Z")
    late = _run(runs, "late", "2026-04-01T00:00:00Z")
    # not in git: nothing shows it came first
    prov = R.provenance(reg, [late])
    assert prov["git"]["note"] == "not in git" and prov["precedes"] is None
    assert "not in git" in "\n".join(R.format_provenance(prov))
    _git(repo, "add", "reg.json")
    _git(repo, "commit", "-q", "-m", "register", date="2026-03-01T00:00:00+00:00")
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H %cI", "--",
                          "reg.json"], cwd=repo, capture_output=True, text=True).stdout.split()
    prov = R.provenance(reg, [late])
    assert (prov["git"]["commit"], prov["git"]["date"]) == (out[0], out[1])
    assert prov["git"]["edited_since"] is False and prov["precedes"] is True
    assert "all after the registration first appeared in git" in \
        R.format_provenance(prov)[-1]
    prov = R.provenance(reg, [early, late])
    assert prov["precedes"] is False and prov["before_git"] == 1
    assert "1 of them BEFORE" in R.format_provenance(prov)[-1]
    # edited after it entered git (the hash re-made to match): git still shows the edit
    doc = json.loads(reg.read_text())
    doc["command"] = "edited"
    doc["sha256"] = R.registration_sha256(doc)
    reg.write_text(json.dumps(doc))
    prov = R.provenance(reg, [late])
    assert prov["git"]["edited_since"] is True and "differs" in prov["git"]["note"]


def test_a_learned_ape_prediction_states_its_protocol_in_table_and_json(registration,
                                                                          tmp_path):
    _, table = registration
    ape = table[table.index("count                  ape_learned"):]
    assert "conditions: assumes training with random position offsets" in ape
    nope = table[table.index("count                  nope"):table.index("ape_learned")]
    assert "conditions:" not in nope
    p = _rasp(["score", "count", "--pe", "nope", "--pe", "ape_learned", "--json"], tmp_path)
    assert p.returncode == 0, p.stderr
    got = {d["pe"]: d for d in json.loads(p.stdout)}
    assert got["ape_learned"]["assumes"] == {"position_offsets": "random"}
    assert got["nope"]["assumes"] is None
    assert "random position offsets" in got["ape_learned"]["theory"]


def test_train_ape_learned_without_offsets_warns_in_one_line(tmp_path):
    from rasp_cli.commands.train import offsets_warning
    w = offsets_warning(["nope", "ape_learned"], "quick", {})
    assert w.startswith("warning: ape_learned ") and "\n" not in w
    for words in ("RASP-L", "C-RASP[periodic, local]", "random position offsets",
                  "'no theory'", "--preset demo_random_offsets",
                  "--set position_offsets=random"):
        assert words in w
    assert offsets_warning(["ape_learned"], "demo_random_offsets", {}) is None
    assert offsets_warning(["ape_learned"], "quick", {"position_offsets": "random"}) is None
    assert offsets_warning(["nope", "rope"], "quick", {}) is None
    assert offsets_warning(["ape_learned"], "no_such_preset", {}) is None   # train says why
    p = _rasp(["train", "count", "--pe", "ape_learned", "--preset", "quick", "--steps", "1",
               "--train-max-len", "3", "--set", "eval_samples=2", "--set", "probe_every=0",
               "-o", str(tmp_path / "run"), "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stderr.splitlines() if "warning:" in x]
    assert lines == [w.replace("nope, ", "")]
    p = _rasp(["train", "count", "--pe", "ape_learned", "--preset", "quick", "--steps", "1",
               "--train-max-len", "3", "--set", "eval_samples=2", "--set", "probe_every=0",
               "--set", "position_offsets=random", "-o", str(tmp_path / "run2"),
               "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "warning:" not in p.stderr


def test_validate_registered_reports_hash_git_and_runs(tmp_path, capsys):
    """End to end: registered before any run, then checked (3 training steps): the report
    ends with the hash, "not in git" and the runs' times; a learned APE trained without
    random offsets gets "no theory" against its registered prediction."""
    from rasp_cli.main import main
    reg, runs = tmp_path / "r.json", tmp_path / "runs"
    assert main(["score", "sort_unique", "--pe", "nope", "--pe", "ape_learned", "--register",
                 str(reg), "--runs", str(runs)]) == 0
    sha = json.loads(reg.read_text())["sha256"]
    capsys.readouterr()
    argv = ["validate-predictor", "--registered", str(reg), "--registered-sha256", sha,
            "--seeds", "0", "--steps", "3", "--runs", str(runs)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"Registration {reg}: sha256 {sha} (checked" in text
    assert "In git: not in git." in text and "Runs: 2, created" in text
    assert "nothing shows it came first" in text
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["pe"]: r for r in out["rows"]}
    assert rows["ape_learned"]["prediction"] == "no theory"
    prov = out["registration"]
    assert prov["runs"] == 2 and prov["precedes"] is None and prov["before_registered_at"] == 0
    # now the cell has runs: registering it again is refused
    assert main(["score", "sort_unique", "--pe", "nope", "--register",
                 str(tmp_path / "again.json"), "--runs", str(runs)]) == 2
    assert "runs already exist" in capsys.readouterr().err
