"""The RASP-L library is RASP-L: each function, applied to integer tokens with its default
arguments, passes rasp.analyses.raspl.check (causal selectors, int8 values, index rule, no length)."""

import pytest

from rasp import run_source

CALLS = {
    "shift_right": "shift_right(tokens, 1)", "cumsum": "cumsum(tokens == 1)",
    "where": "where(tokens == 1, tokens, 0)", "mask": "mask(tokens, tokens > 1)",
    "maximum": "maximum(tokens)", "minimum": "minimum(tokens)", "argmax": "argmax(tokens)",
    "argmin": "argmin(tokens)", "num_prev": "num_prev(tokens, tokens)",
    "has_seen": "has_seen(tokens, tokens)", "firsts": "firsts(tokens, tokens)",
    "lasts": "lasts(tokens, tokens)", "index_select": "index_select(tokens, indices - 1)",
    "first_true": "first_true(tokens == 1)", "mode": "mode(tokens)",
    "binary_mode": "binary_mode(tokens)", "induct_kqv": "induct_kqv(tokens, tokens, tokens, 1)",
    "induct": "induct(tokens, tokens, 1)", "induct_prev": "induct_prev(tokens, tokens, -1)",
    "prefix_len": "prefix_len()",
}


@pytest.fixture(scope="module")
def env():
    body = "\n".join(f"r_{k} = {v};" for k, v in CALLS.items())
    return run_source('load "rasp_l";\ntokens = tokens_int;\n' + body)


def test_every_library_function_is_called():
    lib = run_source('load "rasp_l";')
    assert set(CALLS) == set(lib.own_names())


@pytest.mark.parametrize("name", sorted(CALLS))
def test_library_function_is_valid_raspl(env, name):
    from rasp.analyses.raspl import check
    report = check(env[f"r_{name}"], vocab=["0", "1", "2", "3"], max_seq_len=8)
    assert report.valid, [str(v) for v in report.violations]
