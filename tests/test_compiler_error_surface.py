"""Only CompilerError leaves compile_program, whatever a program's Python callable raises
(issue 27, item 2): a corpus of callables raising every builtin exception type. Where the
callable raises on some value, the compiled model must raise exactly where the interpreter
does; otherwise the program is refused with a CompilerError."""

import builtins

import pytest

import rasp
from compiler import CompiledRuntimeError, CompilerError, compile_program
from rasp.ir import map_sop, tokens

#: every builtin exception class a callable can raise (the interpreter-stopping ones excluded)
EXCEPTIONS = sorted(
    (c for c in vars(builtins).values()
     if isinstance(c, type) and issubclass(c, Exception)
     and not issubclass(c, (BaseExceptionGroup,))),
    key=lambda c: c.__name__)


def _raiser(exc):
    def f(x):
        if x == "b":
            if issubclass(exc, UnicodeDecodeError):
                raise exc("utf-8", b"\xff", 0, 1, "boom")
            if issubclass(exc, (UnicodeEncodeError, UnicodeTranslateError)):
                raise exc("utf-8", "x", 0, 1, "boom") if exc is UnicodeEncodeError \
                    else exc("x", 0, 1, "boom")
            raise exc("boom")
        return x + x
    return f


def test_the_corpus_covers_the_builtin_exceptions():
    names = {c.__name__ for c in EXCEPTIONS}
    assert {"AttributeError", "NameError", "StopIteration", "KeyError", "OSError",
            "RecursionError", "ZeroDivisionError", "Exception"} <= names
    assert len(EXCEPTIONS) >= 50


@pytest.mark.parametrize("exc", EXCEPTIONS, ids=lambda c: c.__name__)
def test_a_raising_callable_never_escapes_compile_program(exc):
    sop = map_sop(_raiser(exc), tokens)
    try:
        cm = compile_program(sop, vocab=["a", "b"], max_seq_len=3)
    except CompilerError:
        return                                   # refused: allowed, with a reason
    # compiled: the model agrees with the interpreter where it computes, and raises where
    # the interpreter raises (the value "b")
    assert cm.run(["aa"])[0].tolist() == rasp.evaluate(sop, ["aa"])[0].tolist() == ["aa", "aa"]
    # the interpreter reports the callable's own error as a RASPError naming the map, the
    # callable's exception as its cause (issue 38 item 3)
    with pytest.raises(rasp.RASPError, match="map .* the Python callable raised") as err:
        rasp.evaluate(sop, ["ab"])
    assert isinstance(err.value.__cause__, exc)
    with pytest.raises(CompiledRuntimeError):
        cm.run(["ab"])
