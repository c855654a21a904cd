"""Statement semantics of the dialect: assignment, def/closures, for, comprehensions, indexing,
ternary, `in`, load, reserved names, error positions, rollback of failed statements, causal
mode. Expected values are plain-Python ground truths."""

import os

import numpy as np
import pytest

from rasp import RASPSyntaxError, Session, evaluate, run_file, run_source
from rasp.ir import (Aggregate, Map, RASPError, RASPNameError, RASPTypeError, Select, Selector,
                     SelectorWidth, SequenceMap, SOp, topological_order)


def ev(sop, inp):
    return evaluate(sop, inp).tolist()[0]


def test_multiple_assignment_and_out():
    env = run_source("a, b = 3, 5; a + b;")
    assert (env["a"], env["b"], env["out"]) == (3, 5, 8)


def test_function_several_returns_and_unpacking():
    env = run_source("def f(x) { return x + 1, x * 2; } p, q = f(3); r = f(1);")
    assert (env["p"], env["q"], env["r"]) == (4, 6, [2, 2])


def test_late_binding_and_closures():
    env = run_source("""
        def f() { return g() + 1; }
        def g() { return 10; }
        x = f();
        def make_adder(n) {
            def add(v) { return v + n; }
            return add;
        }
        add3 = make_adder(3);
        y = add3(4);
    """)
    assert env["x"] == 11 and env["y"] == 7


def test_function_scope_does_not_leak():
    env = run_source("z = 1; def f(a) { z = a; return z; } w = f(5);")
    assert env["z"] == 1 and env["w"] == 5


def test_default_parameters():
    env = run_source("def f(a, b=10) { return a + b; } x = f(1); y = f(1, 2);")
    assert (env["x"], env["y"]) == (11, 3)


def test_for_loop_and_comprehensions():
    env = run_source("""
        total = 0;
        for i in range(5) { total = total + i; }
        squares = [i * i for i in range(4)];
        d = {k: v for k, v in zip(["a", "b"], [1, 2])};
        pairs = 0;
        for k, v in zip([1, 2], [3, 4]) { pairs = pairs + k * v; }
        keys = [k for k in {"x": 1, "y": 2}];
    """)
    assert env["total"] == 10 and env["squares"] == [0, 1, 4, 9]
    assert env["d"] == {"a": 1, "b": 2} and env["pairs"] == 11 and env["keys"] == ["x", "y"]
    assert "i" in env  # for binds in the current scope (original semantics)


def test_range_len_zip():
    env = run_source("a = range(2, 8, 3); b = len([1, 2, 3]); c = zip([1], [2]); e = range(3);")
    assert env["a"] == [2, 5] and env["b"] == 3 and env["c"] == [[1, 2]] and env["e"] == [0, 1, 2]


def test_indexing_atoms_and_sops():
    env = run_source("""
        l = [10, 20, 30]; a = l[-1]; s = "abc"[1]; d = {"x": 5}["x"];
        first = tokens[0]; last = tokens[-1];
        looked = ["a", "b", "c", "d", "e", "f", "g"][indices];
        mapped = {"h": 1, "e": 2, "l": 3, "o": 4}[tokens];
    """)
    assert (env["a"], env["s"], env["d"]) == (30, "b", 5)
    assert ev(env["first"], "hello") == list("hhhhh")
    assert ev(env["last"], "hello") == list("ooooo")
    assert isinstance(env["first"], Aggregate)
    assert ev(env["looked"], "hello") == list("abcde")
    assert ev(env["mapped"], "hello") == [1, 2, 3, 3, 4]


def test_ternary_and_in_on_sops():
    env = run_source("""
        t = "V" if tokens in ["a", "e", "i", "o", "u"] else "c";
        n = indices if indices < 2 else 0 - indices;
        has_l = "l" in tokens;
        lazy = 1 if True else undefined_name;
    """)
    assert ev(env["t"], "hello") == list("cVccV")
    assert ev(env["n"], "hello") == [0, 1, -2, -3, -4]
    assert ev(env["has_l"], "hello") == [True] * 5 and ev(env["has_l"], "abc") == [False] * 3
    assert env["lazy"] == 1
    assert isinstance(env["t"], SequenceMap)


def test_selector_and_or_not():
    env = run_source("""
        lt = select(indices, indices, <); eq = select(indices, indices, ==);
        le = lt or eq; gt = not le; none = lt and eq;
    """)
    m = np.asarray(evaluate(env["le"], "abcd"))[0]
    q, k = np.meshgrid(range(4), range(4), indexing="ij")
    assert (m == (k <= q)).all()
    assert (np.asarray(evaluate(env["gt"], "abcd"))[0] == (k > q)).all()
    assert not np.asarray(evaluate(env["none"], "abcd")).any()


def test_select_comparisons_match_definition():
    # [q, k] is true when keys[k] op queries[q] (original RASP's select)
    ops = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
           ">": np.greater, ">=": np.greater_equal}
    seq = [3, 1, 2, 1]
    for op, f in ops.items():
        env = run_source(f"s = select(tokens_int, tokens_int, {op});")
        m = np.asarray(evaluate(env["s"], seq))[0]
        keys = np.array(seq)[None, :]
        queries = np.array(seq)[:, None]
        assert (m == f(keys, queries)).all(), op


def test_aggregate_reductions_and_kqv():
    env = run_source("""
        prev = select(indices, indices, <=);
        mx = aggregate(prev, tokens_int, 0, "max");
        mn = aggregate(prev, tokens_int, 0, "min");
        mean = aggregate(prev, tokens_int);
        k = kqv(indices, indices, tokens_int, <=, 0, "mean");
        w = selector_width(prev);
    """)
    seq = [3, 1, 4, 1, 5]
    assert ev(env["mx"], seq) == [max(seq[:i + 1]) for i in range(5)]
    assert ev(env["mn"], seq) == [min(seq[:i + 1]) for i in range(5)]
    assert ev(env["mean"], seq) == pytest.approx([sum(seq[:i + 1]) / (i + 1) for i in range(5)])
    assert ev(env["k"], seq) == [int(sum(seq[:i + 1]) / (i + 1)) for i in range(5)]
    assert ev(env["w"], seq) == [1, 2, 3, 4, 5]


def test_apply_sop_to_input():
    env = run_source('r = aggregate(select(indices, length - indices - 1, ==), tokens); '
                     'x = r("abc"); y = r([1, 2]);')
    assert env["x"] == ["c", "b", "a"] and env["y"] == ["2", "1"]


def test_names_and_spans_of_ir_nodes():
    env = run_source("a = 1;\nflip = select(indices, length - indices - 1, ==);\n"
                     "rev = aggregate(flip, tokens);", filename="p.rasp")
    rev, flip = env["rev"], env["flip"]
    assert rev.name == "rev" and flip.name == "flip"
    assert (rev.span.file, rev.span.line, rev.span.column) == ("p.rasp", 3, 7)
    assert (flip.span.line, flip.span.column) == (2, 8)
    for n in topological_order(rev):
        if n.kind not in ("tokens", "indices", "length"):
            assert n.span is not None, n


def test_assigning_existing_node_keeps_its_name():
    env = run_source("a = select(indices, indices, ==); b = a; t = tokens;")
    assert env["b"].name == "a" and env["t"].name == "tokens"
    env = run_source("indices + 1; y = out;")   # `out` is only a provisional name
    assert env["y"].name == "y"


def test_tokens_reassignable_and_reserved_names():
    env = run_source("tokens = tokens_int; s = tokens + 1;")
    assert ev(env["s"], [1, 2]) == [2, 3]
    for name in ["indices", "length", "select", "aggregate", "tokens_str", "True", "round",
                 "out", "tokens_asis", "False", "range", "zip", "len"]:
        with pytest.raises(RASPNameError) as ei:
            run_source(f"{name} = 3;")
        assert "reserved" in str(ei.value)
    with pytest.raises(RASPNameError):
        run_source("def f(length) { return 1; }")


def test_user_definitions_override_library():
    env = run_source("def count(a, b) { return 42; } x = count(1, 2); y = sort(tokens, tokens);")
    assert env["x"] == 42
    assert ev(env["y"], "cab") == list("abc")   # the library's sort still works


@pytest.mark.parametrize("src, cls, needle, line, col", [
    ("x = 1;\ny = unknown + 1;", RASPNameError, "unknown name 'unknown'", 2, 5),
    ("s = select(indices, indices);", RASPTypeError, "select takes 3 arguments", 1, 5),
    ("a = aggregate(tokens, tokens);", RASPTypeError, "expects a selector", 1, 5),
    ("def f(a) { return a; }\nx = f(1, 2);", RASPTypeError, "f takes 1 argument", 2, 5),
    ("x = 1 / 0;", RASPError, "division by zero", 1, 5),
    ('x = 1 + "a";', RASPTypeError, "cannot apply '+'", 1, 5),
    ("x = [1, 2][5];", RASPError, "out of range", 1, 5),
    ("x = tokens[indices];", RASPTypeError, "index into an s-op", 1, 5),
    ("x = select(indices, indices, ==) + 1;", RASPTypeError, "selector", 1, 5),
    ("x = 3; x(1);", RASPTypeError, "not callable", 1, 8),
    ("def f() { return f(); } y = f();", RASPError, "nested too deeply", 1, 18),
])
def test_error_messages_have_positions(src, cls, needle, line, col):
    with pytest.raises(cls) as ei:
        run_source(src, filename="e.rasp")
    msg = str(ei.value)
    assert needle in msg
    assert msg.startswith(f"e.rasp:{line}:{col}:"), msg


def test_averaging_strings_is_detected_at_evaluation():
    env = run_source("m = aggregate(select(indices, indices, <=), tokens);")
    with pytest.raises(RASPTypeError) as ei:
        evaluate(env["m"], "abc")
    assert "average" in str(ei.value) and "1:5" in str(ei.value)


def test_failed_statement_leaves_env_unchanged():
    s = Session()
    s.execute("a = 1; b = 2;")
    for bad in ["a = 5; c = nope;", "a, b = 7, nope;", "for i in [1, 2] { a = i; b = nope; }",
                'load "no_such_file";', "def g(x) { return x; } a = g(1, 2);"]:
        with pytest.raises(RASPError):
            s.execute(bad)
        assert s.env["b"] == 2 and "c" not in s.env
    # statements before the failing one in the same input are kept (original REPL behaviour)
    assert s.env["a"] == 5
    with pytest.raises(RASPSyntaxError):
        s.execute("a = 100; b = ;")
    assert s.env["a"] == 5   # a syntax error runs nothing


def test_session_results():
    s = Session()
    res = s.execute('x = select(indices, indices, ==); def f(a) { return a; } 3 + 4; x; '
                    'l = [1]; d = {"a": 1}; for i in [1] { j = i; }')
    kinds = [(r.name, r.kind) for r in res]
    assert kinds == [("x", "selector"), ("f", "function"), ("out", "atom"), ("x", "selector"),
                     ("l", "list"), ("d", "dict"), (None, "none")]
    assert set(s.names()) >= {"x", "f", "out", "l", "d", "i", "j"}
    assert "count" in s.env and "count" not in s.names()   # library visible, not own


def test_draw_prints_flow():
    lines = []
    s = Session(output=lines.append)
    res = s.execute('r = aggregate(select(indices, length - indices - 1, ==), tokens); '
                    'draw(r, "abc");')
    text = "\n".join(lines)
    assert "r" in text and "[c, b, a] (strings)" in text and res[-1].text == text


def test_causal_directive_and_flag(tmp_path):
    src = "s = select(indices, indices, \"TRUE\"); w = selector_width(s);"
    env = run_source(src)
    assert not env["s"].causal and ev(env["w"], "abc") == [3, 3, 3]
    env = run_source("#!causal\n" + src)
    assert env["s"].causal and ev(env["w"], "abc") == [1, 2, 3]
    env = run_source(src, causal=True)
    assert env["s"].causal
    s = Session()
    s.causal = True
    s.execute(src)
    assert s.env["s"].causal
    # every select of the causal base library is causal too
    assert s.env["full_s"].causal and not Session().env["full_s"].causal


def test_causal_library_functions_are_causal_anywhere():
    env = run_source('load "rasp_l"; c = cumsum(tokens == "a");')
    assert ev(env["c"], "abaa") == [1, 1, 2, 3]
    assert all(n.causal for n in topological_order(env["c"]) if isinstance(n, Select))


def test_load_relative_private_names_and_run_file(tmp_path):
    (tmp_path / "lib.rasp").write_text("def double(x) { return 2 * x; } _hidden = 1; pub = 2;")
    (tmp_path / "main.rasp").write_text('load "lib"; y = double(pub);')
    env = run_file(tmp_path / "main.rasp")
    assert env["y"] == 4 and "_hidden" not in env
    with pytest.raises(RASPNameError):
        run_file(tmp_path / "missing.rasp")


def test_circular_load_is_an_error(tmp_path):
    (tmp_path / "a.rasp").write_text('load "b";')
    (tmp_path / "b.rasp").write_text('load "a";')
    with pytest.raises(RASPError) as ei:
        run_file(tmp_path / "a.rasp")
    assert "circular" in str(ei.value)


def test_numerical_and_categorical_annotations():
    env = run_source("a = numerical(aggregate(select(indices, indices, <=), tokens_int)); "
                     "b = categorical(tokens + \"x\");")
    assert env["a"].encoding == "numerical" and env["b"].encoding == "categorical"
    env = run_source("t = numerical(tokens_int); u = t + 1;")
    assert env["t"].encoding == "numerical"
    assert run_source("v = tokens_int;")["v"].encoding == "categorical"   # no leak
    assert ev(env["u"], [1, 2]) == [2, 3]


def test_partial_results_on_error():
    s = Session()
    with pytest.raises(RASPError) as ei:
        s.execute("a = 1; b = 2; c = nope;")
    assert [r.name for r in ei.value.partial_results] == ["a", "b"]


def test_ternary_mixing_strings_and_numbers_is_an_error_only_where_a_sequence_mixes():
    # the original RASP zips the sequences and type-checks each result (Support.py
    # lazy_type_check): an error only for a sequence that ends up mixed
    env = run_source('t = "a" if indices > 1 else 1; u = tokens if length == 2 else 7; '
                     'v = tokens if aggregate(select(indices, 0, ==), tokens) == "a" else 7;')
    with pytest.raises(RASPTypeError) as ei:
        evaluate(env["t"], "abc")
    assert "cannot mix strings and numbers" in str(ei.value) and "1:5" in str(ei.value)
    assert evaluate(env["t"], "ab").tolist() == [[1, 1]]           # never reaches index 2
    assert evaluate(env["u"], "ab").tolist() == [["a", "b"]]
    assert evaluate(env["u"], "abc").tolist() == [[7, 7, 7]]
    # one batch, sequences of different kinds: each as on its own
    got = evaluate(env["v"], ["ab", "ba", "aa"])
    assert [list(r) for r in got] == [["a", "b"], [7, 7], ["a", "a"]]


def test_string_times_integer_repeats_as_python():
    env = run_source('f = tokens * 2; g = indices * tokens; h = tokens * (indices == 1); '
                     'k = 3 * "ab"; m = "ab" * -1;')
    assert evaluate(env["f"], "ab").tolist() == [["aa", "bb"]]
    assert evaluate(env["g"], "abc").tolist() == [["", "b", "cc"]]
    assert evaluate(env["h"], "abc").tolist() == [["", "b", ""]]
    assert env["k"] == "ab" * 3 and env["m"] == ""
    for bad in ('x = tokens * tokens;', 'x = tokens * 1.5;', 'x = "ab" * 2.0;'):
        with pytest.raises(RASPTypeError):
            evaluate(run_source(bad)["x"], "ab") if "tokens" in bad else run_source(bad)


def test_errors_in_functions_name_the_call_sites():
    with pytest.raises(RASPNameError) as ei:
        run_source("def g(a) { return a + q; }\ndef f(a) { return g(a); }\nx = f(1);", "c.rasp")
    msg = str(ei.value)
    assert msg.startswith("c.rasp:1:23: unknown name 'q'")
    assert "called from c.rasp:2:19: g(a)" in msg and "called from c.rasp:3:5: f(1)" in msg
