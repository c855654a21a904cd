"""The one owner of which runs exist (issue 35 item 1): the Study the report, the main job, the
predictor's validation and ``rasp train --grid`` plan with. The expected run lists are written
out here from the documented experiment (README / docs/results.md: the main job is sort_unique
with six PEs x 5 seeds, the learned APE with random offsets, and copy_repeat with NoPE x 5)."""

from pathlib import Path

from analysis.reporting.report import ReportOptions, report_study, wanted_runs
from analysis.training.study import Study
from rasp_model import PE_NAMES


def test_the_main_job_is_35_runs_in_the_documented_directories():
    runs = report_study(["sort_unique", "copy_repeat"], ReportOptions(preset="demo")).runs()
    want = [f"runs/sort_unique/{pe}/seed{s}-" + ("demo_random_offsets" if pe == "ape_learned"
                                                 else "demo")
            for pe in PE_NAMES for s in range(5)]
    want += [f"runs/copy_repeat/nope/seed{s}-demo" for s in range(5)]
    assert [r.run_dir for r in runs] == want
    assert {(r.task, r.pe, r.seed, r.preset) for r in runs} == {
        (Path(d).parts[1], Path(d).parts[2], int(Path(d).name[4]), Path(d).name.split("-", 1)[1])
        for d in want}


def test_the_quick_report_adds_nopes_other_seed_and_matches_wanted_runs():
    opts = ReportOptions(preset="quick", pes=["nope", "t5"])
    st = report_study(["copy_unique"], opts)
    assert [(r.pe, r.seed) for r in st.runs()] == [("nope", 0), ("nope", 1), ("t5", 0)]
    assert [(pe, s, str(d)) for pe, s, d in wanted_runs("copy_unique", opts)] == [
        (r.pe, r.seed, r.run_dir) for r in st.runs()]


def test_validation_and_train_grid_plan_task_pe_seed_with_a_preset_per_pe():
    st = Study(tasks=["count", "parity"], pes=["nope", "ape_learned"], seeds=[0, 1],
               train_preset="quick", pe_train_presets={"ape_learned": "demo_random_offsets"},
               overrides={"steps": 3}, runs_root="r")
    got = [(r.task, r.pe, r.seed, r.preset, r.run_dir, r.overrides) for r in st.runs()]
    assert got[0] == ("count", "nope", 0, "quick", "r/count/nope/seed0-quick", {"steps": 3})
    assert got[3] == ("count", "ape_learned", 1, "demo_random_offsets",
                      "r/count/ape_learned/seed1-demo_random_offsets", {"steps": 3})
    assert len(got) == 8 and [g[0] for g in got] == ["count"] * 4 + ["parity"] * 4
    # the default preset keeps the directory without a suffix, as rasp train always wrote
    assert Study(["count"], ["t5"], [2]).runs()[0].run_dir == "runs/count/t5/seed2"


def test_a_sweep_configuration_is_a_flat_study():
    """``rasp sweep`` keeps its layout ``<root>/<pe>/<configuration>/seed<k>``."""
    st = Study(["count"], ["nope"], [0, 3], train_preset="quick", overrides={"lr": 1e-3},
               runs_root="runs/sweeps/s/count/nope/lr=0.001-abc123", flat=True, tag="lr=0.001")
    assert [(r.run_dir, r.tag, r.preset) for r in st.runs()] == [
        ("runs/sweeps/s/count/nope/lr=0.001-abc123/seed0", "lr=0.001", "quick"),
        ("runs/sweeps/s/count/nope/lr=0.001-abc123/seed3", "lr=0.001", "quick")]
