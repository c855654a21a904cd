"""Random text fed to the parser raises only RASPSyntaxError, and fed to a session only
RASPError subclasses: lark exceptions and Python errors never escape."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rasp import RASPSyntaxError, Session
from rasp.ir import RASPError
from rasp.parser import parse

_PIECES = ["x", "y", "tokens", "indices", "length", "select", "aggregate", "selector_width",
           "def", "return", "for", "in", "if", "else", "and", "or", "not", "load", "(", ")",
           "[", "]", "{", "}", ",", ";", "=", "==", "<", ">", "<=", "!=", "+", "-", "*", "/",
           "%", "^", "0", "1", "2", "3.5", '"a"', '"', "#", "\n", " ", ":", "True", "range",
           "len", "zip", "round", "indicator", "kqv", "f", "x[0]", "count"]

texts = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(_PIECES), max_size=25).map(" ".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_parser_raises_only_syntax_errors(text):
    try:
        parse(text)
    except RASPSyntaxError as e:
        assert e.span is not None and e.span.line >= 1 and e.span.column >= 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_session_raises_only_rasp_errors(text):
    s = Session(output=lambda text: None)
    try:
        s.execute(text)
    except RASPError as e:
        assert str(e)   # a message, never another exception type
