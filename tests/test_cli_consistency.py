"""The `rasp` command as one tool: negative vocabularies parse (our special tokens are
negative), task names are checked before anything else."""

from rasp_cli.main import main


def test_negative_vocabulary_values_are_values_not_options(tmp_path, capsys):
    assert main(["compile", "rasp/stdlib/examples.rasp", "--name", "hist", "--vocab",
                 "-3,-2,1", "--max-len", "4"]) == 0
    out = capsys.readouterr().out
    assert "|" in out                                  # the compiled model's table


def test_train_names_an_unknown_task_before_an_unknown_pe(capsys):
    assert main(["train", "no_such_task", "--pe", "xpe"]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'no_such_task'" in err and "positional encoding" not in err


def test_a_real_option_after_a_negative_value_still_counts(capsys):
    # "-3,-2" is a value; "--max-len" after it is still an option
    assert main(["compile", "rasp/stdlib/examples.rasp", "--vocab", "-3,-2", "--name", "hist",
                 "--max-len", "3"]) == 0


def test_seeds_means_the_same_in_every_subcommand():
    """`--seeds` names the seeds themselves (a comma list and inclusive ranges) in train,
    sweep and validate-predictor; a count is never meant (issue 28 item 5)."""
    import pytest as _pytest
    from rasp_cli.common import UsageError, parse_seeds
    from rasp_cli.main import build_parser
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3") == [3]
    assert parse_seeds("0,2, 5-6") == [0, 2, 5, 6]
    for bad in ("", "a", "4-2", "-1", "0,0", "0-100000", "1.5"):
        with _pytest.raises(UsageError):
            parse_seeds(bad)
    for argv in (["train", "--grid", "count", "--seeds", "0-2"],
                 ["sweep", "count", "--pe", "nope", "--grid-file", "x.toml", "--seeds", "0-2"],
                 ["validate-predictor", "count", "--seeds", "0-2"]):
        args = build_parser(argv).parse_args(argv)
        assert parse_seeds(args.seeds) == [0, 1, 2], argv
