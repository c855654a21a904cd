"""Training-length curves (`rasp curve`, issue 47 item 1): a real curve on a tiny task whose
transition is known by construction, and the shortest-length rule on given numbers."""

import json
from pathlib import Path

from analysis.evidence.claims import run_record
from analysis.experiment.curve import curve_from_records, format_curve
from rasp_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
LATE_B = ROOT / "tasks" / "examples" / "late_b.py"


def test_curve_recovers_a_known_transition(tmp_path, capsys):
    """late_b: a b occurs only in strings of length >= 4, so training on 1..3 never shows one
    (the task cannot be learned there), while 1..8 does and #b > 0 is a one-count C-RASP[]
    program NoPE generalizes with. The curve must not call L = 3 generalizing and must find
    L = 8 the shortest length that does (5 seeds: the rule can decide)."""
    out = tmp_path / "out"
    argv = ["curve", "--task-file", str(LATE_B), "--pe", "nope", "--train-lengths", "3,8",
            "--preset", "quick", "--steps", "150", "--seeds", "0-4", "--serial",
            "--runs", str(tmp_path / "runs"), "-o", str(out), "--json", "--no-progress"]
    assert main(argv) == 0
    curve = json.loads(capsys.readouterr().out)
    points = {p["train_max_len"]: p for p in curve["points"]}
    assert points[3]["outcome"] != "generalizes"
    assert points[8]["outcome"] == "generalizes"
    assert curve["shortest"] == {"nope": 8} and curve["stays"] == {"nope": True}
    # the runs at each length have their own directories, trained on 1..L; at the task's own
    # length (LENGTHS 1..8) they are the directories `rasp train --task-file` writes
    # (seed<k>-quick), so a curve picks up the runs trained before it
    for L, p in points.items():
        want = [f"seed{k}-quick" + ("" if L == 8 else f"-L{L}") for k in range(5)]
        assert [Path(d).name for d in p["run_dirs"]] == want
        cfg = json.loads((Path(p["run_dirs"][0]) / "config.json").read_text())
        assert cfg["train"]["train_max_len"] == L
    assert json.loads((out / "curve.json").read_text())["shortest"] == {"nope": 8}
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "- nope: 8" in (out / "curve.md").read_text()
    # a second call reuses every finished run (no training): same numbers
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert [p["ood_em"] for p in again["points"]] == [p["ood_em"] for p in curve["points"]]


def _rec(pe, seed, L, ood):
    cfg = {"task": "t", "pe": pe, "seed": seed, "model": {"pe": pe},
           "train": {"position_offsets": "none", "train_max_len": L}}
    acc = [{"length": L, "split": "id", "em": 1.0, "n": 200},
           {"length": L + 1, "split": "ood", "em": ood, "n": 200},
           {"length": 2 * L, "split": "ood", "em": ood, "n": 200}]
    return run_record(cfg, acc, f"runs/t/{pe}/seed{seed}-L{L}")


def test_shortest_length_and_whether_it_stays():
    """A PE above the threshold from L = 20 on has shortest 20; one that passes at 20 and falls
    back at 40 is flagged; one that never passes is 'not within the lengths tried'."""
    ood = {"nope": {10: 0.1, 20: 0.95, 40: 0.97},
           "ape_learned": {10: 0.1, 20: 0.95, 40: 0.1},
           "alibi": {10: 0.1, 20: 0.1, 40: 0.1}}
    recs = {(pe, L): [_rec(pe, s, L, v) for s in range(5)]
            for pe, by_len in ood.items() for L, v in by_len.items()}
    c = curve_from_records("t", recs)
    assert c.shortest == {"nope": 20, "ape_learned": 20, "alibi": None}
    assert c.stays == {"nope": True, "ape_learned": False, "alibi": False}
    assert c.point("alibi", 40).outcome == "fails"
    text = format_curve(c)
    assert "- alibi: not within the lengths tried (10, 20, 40)" in text
    assert "- ape_learned: 20 (not at every longer length tried)" in text
    assert "Izzo, Nichani & Lee" in text


def test_bad_input_is_one_line(tmp_path, capsys):
    for argv in (["curve", "count", "--train-lengths", "0"],
                 ["curve", "no_such_task"],
                 ["curve", "count", "--preset", "bogus"],
                 ["curve"]):
        assert main(argv + ["--runs", str(tmp_path)]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("rasp curve") and "Traceback" not in err
