"""Compiled models and predictions render themselves in notebooks (``_repr_html_``): the HTML
is well-formed and shows the true values (counted on the model, read from the record)."""

from html.parser import HTMLParser

import pytest

import rasp
from compiler import compile_program
from rasp.repl.display import html_table

VOID = {"br", "hr", "img", "meta", "link", "input", "col", "wbr"}


class _Tables(HTMLParser):
    """Checks that every tag is closed in order and collects the cells, caption and <pre>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.rows, self.caption, self.pre, self._text = [], [], "", "", None

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th", "caption", "pre"):
            self._text = []

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
        if tag in ("td", "th"):
            self.rows[-1].append("".join(self._text))
        elif tag == "caption":
            self.caption = "".join(self._text)
        elif tag == "pre":
            self.pre = "".join(self._text)
        if tag in ("td", "th", "caption", "pre"):
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def parse(html: str) -> _Tables:
    p = _Tables()
    p.feed(html)
    p.close()
    assert p.stack == [], f"unclosed tags: {p.stack}"
    return p


def pairs(rows) -> dict:
    """Cells read as key, value, key, value, ... per row."""
    out = {}
    for row in rows:
        for k, v in zip(row[::2], row[1::2]):
            out[k] = v
    return out


@pytest.fixture(scope="module")
def env():
    return rasp.run_source("flip = select(indices, length - indices - 1, ==);"
                           "reverse = aggregate(flip, tokens);"
                           "hist = selector_width(select(tokens, tokens, ==));")


def test_html_table_escapes_every_cell():
    t = parse(html_table([("<b>", "a & b")], header=["k", "v"], caption="<i>",
                         pre="x < y"))
    assert t.rows == [["k", "v"], ["<b>", "a & b"]]
    assert t.caption == "<i>" and t.pre == "x < y"


def test_compiled_model_shows_its_size(env):
    cm = compile_program(env["hist"], vocab=list("abc"), max_seq_len=8)
    t = parse(cm._repr_html_())
    # hist: one head (selector width) and its MLP, one layer; one head, so no per-head
    # padding: the stored parameters are every tensor's elements
    n_params = sum(p.numel() for p in cm.model.parameters())
    n_nonzero = sum(int((p != 0).sum()) for p in cm.model.parameters())
    kv = pairs(t.rows[1:])
    assert kv["parameters"] == f"{n_params:,} ({n_nonzero:,} non-zero)"
    assert kv["layers"] == "1" and kv["heads"] == "1" and kv["MLPs"] == "1"
    assert kv["residual width"] == str(cm.model.cfg.d_model) == str(len(cm.residual_labels))
    assert kv["max_seq_len"] == "8" and kv["vocab"] == "3: a, b, c"
    layer0 = t.rows[0]
    assert layer0[:2] == ["layer 0", "1 head"]
    assert layer0[3] == f"MLP: {cm.model.cfg.mlp_width(0)} hidden units"
    assert "bidirectional" in t.caption


def test_compiled_model_layers_match_the_weights(env):
    """One row per layer, with the heads and MLP hidden units its weight tensors hold."""
    cm = compile_program(env["reverse"], vocab=list("abc"), max_seq_len=6)
    t = parse(cm._repr_html_())
    state = cm.model.state_dict()
    n_layers = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    want = []
    for i in range(n_layers):
        q, w_in = state.get(f"blocks.{i}.attn.W_Q"), state.get(f"blocks.{i}.mlp.W_in")
        want.append((0 if q is None else q.shape[0], 0 if w_in is None else w_in.shape[1]))
    layer_rows = [r for r in t.rows if r[0].startswith("layer ")]
    assert [r[0] for r in layer_rows] == [f"layer {i}" for i in range(n_layers)]
    got = [(int(r[1].split()[0]), int(r[3].split()[1]) if r[3] != "no MLP" else 0)
           for r in layer_rows]
    assert got == want
    assert "reverse" in layer_rows[-1][2]                 # the last head computes the output
    kv = pairs(t.rows[n_layers:])
    assert kv["layers"] == str(n_layers)
    assert kv["heads"] == str(sum(h for h, _ in want))
    assert kv["MLPs"] == str(sum(1 for _, m in want if m))
    # heads narrower than d_head are stored unpadded: the count is the model's own, the
    # padding it leaves out is zeros (the non-zero count is every tensor's)
    stored = cm.model.num_parameters()
    nonzero = sum(int((v != 0).sum()) for v in state.values())
    assert kv["parameters"] == f"{stored:,} ({nonzero:,} non-zero)"
    assert sum(v.numel() for v in state.values()) - stored <= \
        sum(int((v == 0).sum()) for v in state.values())


def test_prediction_shows_verdict_theory_evidence_and_source():
    from analysis.prediction.predict import predict
    import tasks
    rec = predict("sort_unique", samples=2)        # verified to the protocol's 40 (2 x 20)
    t = parse(rec._repr_html_())
    kv = {r[0]: r[1] for r in t.rows}
    assert kv["verdict"] == rec.prediction == "generalizes"
    assert kv["theory"] == "RASP-L (Zhou et al. 2023)"
    ev = kv["RASP-L (Zhou et al. 2023)"]
    assert ev.startswith("generalizes: a verified RASP-L program") and "1..40" in ev
    assert kv["program"].endswith("(shipped)")
    # the source shown is the shipped file, character for character
    assert t.pre == tasks.get_task("sort_unique").reference_source()
    assert "sort_unique" in t.caption


def test_prediction_of_an_invalid_program_names_the_rules():
    from analysis.prediction.predict import predict
    rec = predict("copy_repeat", verify_max_length=8, samples=2, pe="nope")
    kv = {r[0]: r[1] for r in parse(rec._repr_html_()).rows}
    assert kv["verdict"] == rec.prediction
    assert kv["RASP-L status"].startswith("invalid: rules ")
    assert "nope" in parse(rec._repr_html_()).caption


def test_prediction_of_a_python_program_has_no_source():
    from analysis.prediction.predict import predict_program
    from rasp import tokens
    rec = predict_program(tokens, "copy_unique", verify_max_length=4, samples=1)
    t = parse(rec._repr_html_())
    assert t.pre == "" and {r[0]: r[1] for r in t.rows}["program"] == "program (user)"


def test_jupyter_uses_the_tables(env):
    """IPython's display formatter (what Jupyter calls) gives the HTML above."""
    from IPython.core.interactiveshell import InteractiveShell
    from analysis.prediction.predict import predict
    shell = InteractiveShell.instance()
    cm = compile_program(env["hist"], vocab=list("ab"), max_seq_len=4)
    rec = predict("sort_unique", verify_max_length=4, samples=1)
    for obj in (cm, rec):
        data, _ = shell.display_formatter.format(obj)
        assert data["text/html"] == obj._repr_html_()
