"""The GPU benchmark script of stacked training (bench/bench_gpu_stack.py) runs, here in its CPU
smoke mode (tiny model, a few steps): what it writes is what docs/benchmarks.md and the issue
ask for (the device, the GPU name, per stack size ``runs_per_gpu_minute``, the main job)."""

from __future__ import annotations

import json

from bench import bench_gpu_stack


def test_gpu_bench_smoke_mode_writes_its_json(tmp_path):
    out = tmp_path / "gpu_stack.json"
    assert bench_gpu_stack.main(["--device", "cpu", "--smoke", "--main-job",
                                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["gpu"] is None and doc["smoke"] is True
    assert [r["members"] for r in doc["stacks"]] == [1, 3]
    for r in doc["stacks"]:
        assert r["runs_per_gpu_minute"] > 0 and r["ms_per_step"] > 0
        assert not r["captured"]                          # no CUDA graphs on a CPU
    assert doc["main_job"]["ok"] and doc["main_job"]["runs"] == 3
