"""Encodings of s-ops in the residual stream: categorical or numerical.

* **categorical**: one residual direction per value (``name:value``), exactly one of them 1;
* **numerical**: one direction (``name``) holding the value itself.

Rules (Tracr's encodings, with the decisions of ``docs/compiler.md``):

1. An explicit annotation (``numerical(sop)`` / ``categorical(sop)``) wins.
2. A ``mean`` aggregate of numbers that may average several different values is numerical
   (its result is a fraction ``k/n``); annotated categorical it is rejected statically
   (Tracr's failure mode 4 returned one of the values silently).
3. A sum or difference of dependent means (``opens - closes``; ``ValueSets.rounded``) is
   numerical: its value set is exact but the interpreter's floats may differ from it by an ulp.
4. Everything else is categorical at first.
5. **The smallest exact encoding** (``graph.passes.numerical_where_smaller``, before fusion):
   an integer-valued map, sequence map, selector width or one-value-per-query mean aggregate
   without an annotation becomes numerical where every reader can read it as a number (an MLP
   left with at most one numerical input, an affine MLP, steps over an integer affine form, a
   numerical mean) and the model gets smaller (fewer residual directions against the readers'
   extra MLP units). ``sum_mod10`` at ``max_seq_len`` 8: 19.4 M -> 88 k parameters. The
   program's output only when it is such a mean of non-bool integers read by nothing else (the
   unembedding decodes the number exactly: ``make_sort``'s sorted keys).
6. Inputs of a ``select`` (keys and queries), of a ``max``/``min`` aggregate's values and all
   but one input of a non-linear MLP must be categorical: the compiler inserts a conversion
   MLP (a discretising MLP to the categorical encoding) where a numerical s-op is used so,
   except for an integer affine expression of integer inputs, built as steps over its value
   read linearly from the residual stream.
"""

from __future__ import annotations

from rasp.ir import SOp

__all__ = ["CATEGORICAL", "NUMERICAL", "explicit_encoding", "aggregate_encoding"]

CATEGORICAL = "categorical"
NUMERICAL = "numerical"


def explicit_encoding(sop: SOp) -> str | None:
    """The encoding annotation of ``sop`` (``"categorical"``/``"numerical"``) or None."""
    enc = sop.annotations.get("encoding") if sop is not None else None
    return enc if enc in (CATEGORICAL, NUMERICAL) else None


def aggregate_encoding(sop: SOp, values_numeric: bool, may_average: bool) -> str:
    """The encoding of an aggregate's output.

    Args:
        sop: the aggregate (its annotation, if any, wins).
        values_numeric: whether every value of the aggregated s-op is a number / bool.
        may_average: whether a query may average several *different* values (``mean``
            reduction, more than one value, selector not provably selecting at most one key).
    """
    enc = explicit_encoding(sop)
    if enc is not None:
        return enc
    if values_numeric and may_average:
        return NUMERICAL
    return CATEGORICAL
