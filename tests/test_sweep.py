"""Sweep files and Huang et al.'s selection (analysis.training.sweep, `rasp sweep`)."""

import pytest

from analysis.training import sweep
from rasp_cli.main import main


def _rows(id_em, val_em, test_em, L=10):
    """accuracy rows: ID lengths 1..L, validation 11..15, test 16..20 (Huang's split, scaled)."""
    return ([{"length": n, "split": "id", "em": id_em} for n in range(1, L + 1)]
            + [{"length": n, "split": "ood", "em": val_em} for n in range(L + 1, 16)]
            + [{"length": n, "split": "ood", "em": test_em} for n in range(16, 2 * L + 1)])


def test_unknown_key_is_named_with_its_line(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text("# a sweep\nlr = [1e-3, 1e-4]\n\nn_layer = [1, 2]\n")
    with pytest.raises(sweep.SweepError, match=r"s.toml:4: unknown training setting 'n_layer'"):
        sweep.load_sweep(f)
    rc = main(["sweep", "count", "--pe", "nope", "--grid-file", str(f)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "s.toml:4" in err and "'n_layer'" in err and "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    ("pe = ['nope']\n", "set by the run"),
    ("[model]\nlr = 1\n", "is a table"),
    ("lr = []\n", "sweeps no value"),
    ("lr = [1e-3\n", "s.toml"),
])
def test_bad_sweep_files(tmp_path, text, message):
    f = tmp_path / "s.toml"
    f.write_text(text)
    with pytest.raises(sweep.SweepError, match=message):
        sweep.load_sweep(f)


def test_expand_is_the_cartesian_product_with_fixed_settings(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("n_layers = [1, 2, 4]\nlr = [1e-3, 1e-4]\nsteps = 50\nbetas = [[0.9, 0.99]]\n")
    swept, fixed = sweep.load_sweep(f)
    cfgs = sweep.expand(swept, fixed)
    assert len(cfgs) == 3 * 2 * 1
    assert all(c["steps"] == 50 for c in cfgs)
    assert {(c["n_layers"], c["lr"]) for c in cfgs} == {(a, b) for a in (1, 2, 4)
                                                       for b in (1e-3, 1e-4)}
    assert all(c["betas"] == [0.9, 0.99] for c in cfgs)


def test_selection_follows_huang_et_al():
    # A fits and is best on validation; B fits with a higher test EM but lower validation
    # (selection is by validation, not test); C does not fit (ID 0.9) despite the best OOD.
    per = [("A", {}, {0: _rows(1.0, 0.8, 0.4), 1: _rows(1.0, 0.6, 0.2)}),
           ("B", {}, {0: _rows(1.0, 0.5, 0.9), 1: _rows(0.5, 0.0, 0.0)}),
           ("C", {}, {0: _rows(0.9, 1.0, 1.0), 1: None})]
    sel = sweep.select("t", "nope", per, fit=1.0)
    assert sel.n_fitting == 2
    assert sel.best.tag == "A"
    assert sel.best.fitting == [0, 1]
    assert sel.best.val_em == pytest.approx(0.7) and sel.best.test_em == pytest.approx(0.3)
    assert (sel.best.test_min, sel.best.test_max) == (pytest.approx(0.2), pytest.approx(0.4))
    b = next(o for o in sel.configs if o.tag == "B")
    assert b.fitting == [0] and b.test_em == pytest.approx(0.9)   # only its fitting seed
    assert sel.median_test == pytest.approx((0.3 + 0.9) / 2)
    assert (sel.min_test, sel.max_test) == (pytest.approx(0.3), pytest.approx(0.9))
    assert sel.notes and "1 run(s) did not finish" in sel.notes[0]
    assert "selected" in sel.summary() and "median" in sel.summary()


def test_nothing_fits_is_said():
    sel = sweep.select("t", "nope", [("A", {}, {0: _rows(0.5, 0.0, 0.0)})], fit=1.0)
    assert sel.best is None and sel.median_test is None
    assert "nothing to select" in sel.summary()
