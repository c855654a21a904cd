"""Stage 2 (graph), the passes over the lowered nodes, in the order ``build_graph`` runs them.

* :func:`numerical_where_smaller` -- the encoding pass (``compiler/encoding.py`` rule 5);
* :func:`fuse` -- trees of single-consumer MLPs become one MLP;
* :func:`convert_extra_numericals` -- an MLP left with several numerical inputs it cannot
  read gets conversion MLPs for all but one.

Each pass changes the nodes in place and prices its choices with :mod:`compiler.graph.mlp_pricing`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..encoding import CATEGORICAL, NUMERICAL, explicit_encoding
from .expr import Expr, affine_form, affine_steps, int_values
from .mlp_pricing import FUSE_LIMIT, affine_mlp, head_size, mlp_nonzeros, mlp_units
from .nodes import CNode

__all__ = ["consumers", "reachable", "numerical_where_smaller", "fuse",
           "convert_extra_numericals", "smaller", "estimated_params", "estimated_nonzeros"]


def consumers(nodes: list, output: CNode, extra: tuple = ()) -> dict[int, list]:
    cons: dict[int, list] = {id(n): [] for n in nodes}
    for n in nodes:
        for d in n.deps():
            cons.setdefault(id(d), []).append(n)
    for r in (output,) + tuple(extra):
        cons.setdefault(id(r), []).append(None)
    return cons


def reachable(output: CNode, extra: tuple = ()) -> list:
    """The nodes ``output`` (and the ``extra`` roots: nodes computed only for the runtime
    checks) depend on, in a topological order."""
    order, seen = [], set()
    stack = [(r, False) for r in reversed(tuple(extra))] + [(output, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        extra = [n.count_check] if n.count_check is not None else []
        for d in n.deps() + extra:
            if id(d) not in seen:
                stack.append((d, False))
    return order


def dims(n: CNode) -> int:
    """Residual directions of ``n``: one per value categorical, one numerical, none for a
    constant."""
    if n.kind == "full":
        return 0
    return len(n.values) if n.encoding == CATEGORICAL else 1


def unit_price(d_model: int) -> int:
    """Parameters of one MLP unit: its ``W_in`` column and ``W_out`` row."""
    return 2 * d_model


def direction_price(total_units: int, d_model: int) -> int:
    """Parameters of one residual direction: its rows of every MLP (two per unit) and, as
    an estimate, ``d_model`` for its rows of the attention weights and embeddings."""
    return 2 * total_units + d_model


def head_width(nodes: list) -> int:
    """Total width (query-key and value-output dimensions) of the model's attention heads
    (:func:`~compiler.graph.mlp_pricing.head_size`)."""
    return sum(head_size(n)[0] for n in nodes if n.is_attention)


def estimated_params(total_units: int, heads: int, d_model: int) -> int:
    """The model's parameters as the passes price them: two per direction per MLP unit and
    per head dimension (``heads``: :func:`head_width`), and ``d_model`` per direction for
    the embeddings and unembedding."""
    return d_model * (2 * total_units + 2 * heads + d_model)


def estimated_nonzeros(nodes: list) -> int:
    """The model's non-zero weights as the passes price them: every MLP's
    :func:`~compiler.graph.mlp_pricing.mlp_nonzeros`, every head's
    :func:`~compiler.graph.mlp_pricing.head_size`, and two per residual direction for the
    embeddings and unembedding."""
    return sum(mlp_nonzeros(n.encoding, n.expr) for n in nodes if n.kind == "mlp") + \
        sum(head_size(n)[1] for n in nodes if n.is_attention) + \
        2 * (3 + sum(dims(n) for n in nodes))


def smaller(d_params: float, d_nonzeros: float, params: float, nonzeros: float) -> bool:
    """The pricing rule of the passes for a change of ``d_params`` parameters and
    ``d_nonzeros`` non-zero weights to a model of ``params`` and ``nonzeros``: the change is
    kept when the product ``params x non-zeros`` gets smaller -- both fall, or the relative
    saving of one exceeds the relative growth of the other (a 1 % saving of parameters pays
    for less than 1 % more non-zeros)."""
    if d_params <= 0 and d_nonzeros <= 0:
        return d_params < 0 or d_nonzeros < 0
    return (params + d_params) * (nonzeros + d_nonzeros) < params * nonzeros


def numerical_where_smaller(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Encoding pass: give an integer-valued MLP s-op a **numerical** encoding (one residual
    direction instead of one per value) where every reader can read it as a number and the
    model gets smaller (``compiler/encoding.py`` rule 5). Returns the number of s-ops changed.

    Candidates: categorical MLP nodes (maps, sequence maps, selector widths) and mean
    aggregates that copy one value per query (never average different values: the head then
    writes the number instead of its one-hot) with no encoding annotation, whose values are all integers (``|v| <= NUMERICAL_INT_LIMIT``: a discretising
    MLP reads them with gaps >= 1, an affine MLP adds them exactly in float64), that are not the
    program's output (except a copying mean of non-bool integers read by nothing else: the
    unembedding decodes the number exactly) and do not flag an error. Readers allowed: an MLP that then reads at most
    one numerical input, or is itself an affine numerical MLP of numbers; a numerical mean
    aggregate reading it as its values. A select (key or query), a max/min aggregate, a
    categorical aggregate or the output need the categorical encoding, so their inputs stay.

    Nodes are visited from the output down (each reader's encoding is decided before its
    inputs'), and a change is kept when the parameters saved by the fewer residual directions
    exceed the parameters of the extra MLP units (the readers' :func:`mlp_units` before and
    after), with the model's current size as the price of one direction and one unit
    (:func:`direction_price`, :func:`unit_price`), and, when it adds non-zero weights (its own
    block's and its readers' :func:`~compiler.graph.mlp_pricing.mlp_nonzeros` before and after),
    when it still makes the model smaller by :func:`smaller` (params x non-zeros, against
    :func:`estimated_params` and :func:`estimated_nonzeros`)."""
    cons = consumers(nodes, output, extra)
    roots = {id(output)} | {id(r) for r in extra}

    units = {id(p): mlp_units(p.encoding, p.expr) for p in nodes if p.kind == "mlp"}
    d_model = 3 + sum(dims(n) for n in nodes)
    nonzeros = heads = None       # the model's estimated non-zeros and head width, if needed
    changed = 0
    for n in reversed(nodes):
        copy = (n.kind == "aggregate" and n.reduction == "mean" and not n.may_average
                and n.count_check is None)
        # the output itself when it copies integers (read only by the unembedding, which
        # decodes a number as exactly as a one-hot: make_sort's sorted keys)
        out = (copy and n is output and cons.get(id(n)) == [None]
               and not any(isinstance(v, (bool, np.bool_)) for v in n.values))
        if ((n.kind != "mlp" and not copy) or n.encoding != CATEGORICAL or n.internal
                or n.unbounded or (id(n) in roots and not out) or n.error is not None
                or len(n.values) < 2
                or (n.ir is not None and explicit_encoding(n.ir) is not None)
                or not int_values(n.values)):
            continue
        readers = [] if out else cons.get(id(n), [])
        if not out and (not readers or any(r is None for r in readers)):
            continue
        new_units, ok = {}, True
        n.encoding = NUMERICAL                     # tentatively, to cost the readers
        for r in readers:
            if r.kind == "mlp":
                leaves = r.expr.leaves()
                nums = [l for l in leaves if l.encoding != CATEGORICAL]
                if len(nums) > 1 and not affine_mlp(r.encoding, r.expr, leaves) and \
                        affine_steps(r.expr, leaves) is None:
                    ok = False
                    break
                # a one-reader MLP input of r with a numerical input of its own would fuse
                # into r (one layer less); a second numerical input of r would prevent that
                fusing = [l for l in leaves if l is not n and l.kind == "mlp"
                          and len(cons.get(id(l), [])) == 1 and any(
                              x.encoding != CATEGORICAL for x in l.expr.leaves())]
                if fusing and not affine_mlp(r.encoding, r.expr, leaves):
                    ok = False
                    break
                new_units[id(r)] = mlp_units(r.encoding, r.expr, leaves)
            elif (r.kind == "aggregate" and r.encoding == NUMERICAL and r.reduction == "mean"
                  and r.values_node is n and not any(
                      x is n for f in r.selector.factors for x in (f.key, f.query))):
                continue
            else:
                ok = False
                break
        if ok:
            extra_units = sum(u - units[k] for k, u in new_units.items())
            total_units = sum(units.values())
            saved = (len(n.values) - 1) * direction_price(total_units, d_model)
            if copy:        # the head's value / output weights: one column, not one per value
                saved += 2 * d_model * (len(n.values) - 1)
            saved -= unit_price(d_model) * extra_units
            ok = saved > 0
            if ok:
                # the non-zeros: compared only when they grow (then against the whole model)
                after = _nonzeros_around(n, readers)
                n.encoding = CATEGORICAL
                dnz = after - _nonzeros_around(n, readers)
                if dnz > 0 and nonzeros is None:
                    nonzeros = estimated_nonzeros(nodes)
                n.encoding = NUMERICAL
                if dnz > 0:
                    if heads is None:
                        heads = head_width(nodes)
                    ok = smaller(-saved, dnz, estimated_params(total_units, heads, d_model),
                                 nonzeros)
                if ok and nonzeros is not None:
                    nonzeros += dnz
        if not ok:
            n.encoding = CATEGORICAL
            continue
        units.update(new_units)
        d_model -= len(n.values) - 1
        changed += 1
    return changed


def _nonzeros_around(n: CNode, readers: list) -> int:
    """Estimated non-zero weights of the blocks whose non-zeros depend on ``n``'s encoding:
    ``n``'s own MLP (:func:`~compiler.graph.mlp_pricing.mlp_nonzeros`) or head (a copying mean: one
    value and one output weight per value categorical; one output weight and one value weight
    per non-zero value numerical), its MLP readers and the value weights of the numerical
    means reading it (one per non-zero value categorical, one numerical)."""
    cat = n.encoding == CATEGORICAL
    nonzero_values = sum(1 for v in n.values if v != 0)
    if n.kind == "mlp":
        nz = mlp_nonzeros(n.encoding, n.expr, values=n.values)
    else:
        nz = 2 * len(n.values) if cat else nonzero_values + 1
    for r in readers:
        if r.kind == "mlp":
            nz += mlp_nonzeros(r.encoding, r.expr, values=r.values)
        else:
            nz += nonzero_values if cat else 1
    return nz


def fusion_ok(p: CNode, new_expr: Expr, old_cost: int) -> bool:
    """Whether ``p`` may compute ``new_expr`` (:func:`fusion_legal`) in at most 1.5x the
    units of the separate MLPs (``old_cost``; or 64 more): the rule of a fusion that computes
    ``p`` a layer earlier."""
    return fusion_legal(p, new_expr) and mlp_units(p.encoding, new_expr) <= max(
        1.5 * old_cost, old_cost + 64)


def fusion_legal(p: CNode, new_expr: Expr) -> bool:
    """Whether one MLP can compute ``new_expr`` into ``p``: an unbounded input only in an
    affine numerical MLP, several numerical inputs only affinely (or as steps over an
    integer affine form), at most ``FUSE_LIMIT`` combinations of categorical inputs."""
    new_leaves = new_expr.leaves()
    if any(l.unbounded for l in new_leaves) and not (p.encoding == NUMERICAL and affine_form(
            new_expr)):
        return False
    nums = [l for l in new_leaves if l.encoding != CATEGORICAL]
    if len(nums) > 1 and not (p.encoding == NUMERICAL and affine_form(new_expr)) and \
            affine_steps(new_expr, new_leaves) is None:
        return False
    cat_rows = math.prod(len(l.values) for l in new_leaves if l.encoding == CATEGORICAL)
    return cat_rows <= FUSE_LIMIT


def _slot(n: CNode, reads: list, slot: dict) -> int:
    """``n``'s sublayer as ``layer_allocation`` places it (slot ``2l`` the attention of
    layer ``l``, ``2l + 1`` its MLP; -1 embedded) when it reads ``reads``."""
    if n.is_embedded:
        return -1
    s = max([slot.get(id(d), -1) for d in reads] + [-1]) + 1
    return s + 1 if (s % 2 == 0) != n.is_attention else s


def fuse(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Fuse single-consumer MLP nodes into their MLP consumer. Returns the number of fusions.

    For each MLP, first the whole tree of single-consumer MLPs below it is tried at once (so
    ``f(a) + g(a)`` becomes one MLP of ``a``), then single leaves, greedily. A fusion that
    computes the consumer a sublayer earlier (its slot in ``layer_allocation``, tracked here)
    may save a layer: it is kept when it does not blow up the MLP (at most 1.5x the units of
    the separate MLPs, :func:`fusion_ok`); the inputs that compute the consumer latest are
    tried first on their own. A fusion that leaves the consumer where it is saves no layer,
    only the fused nodes' residual directions: it is kept when the model gets smaller by
    :func:`smaller` -- its parameters (directions and units at :func:`direction_price` and
    :func:`unit_price`) and its non-zero weights (:func:`~compiler.graph.mlp_pricing.mlp_nonzeros`
    of the MLPs before and after, two per direction) against the model's
    (:func:`estimated_params`, :func:`estimated_nonzeros`).

    Non-zero pricing never costs a layer: when it turned a fusion down, the fusion is run
    again with the 1.5x rule alone (every fusion it allows kept), and that result is kept
    instead when it has fewer layers (a chain of fusions that each save nothing can together
    compute a node a layer earlier). Passes over the nodes in topological order repeat until
    nothing fuses; within a pass the consumer table and the slots are updated per fusion (not
    rebuilt), so a chain of n maps fuses in O(n)."""
    start = ([(n, n.expr, n.error) for n in nodes if n.kind == "mlp"], list(nodes))
    fused, diverged = _fuse(nodes, output, extra, priced=True)
    if not diverged:
        return fused
    priced = ([(n, n.expr, n.error) for n, _, _ in start[0]], list(nodes))
    layers = _layers(nodes)
    for n, e, err in start[0]:
        n.expr, n.error = e, err
    nodes[:] = start[1]
    plain, _ = _fuse(nodes, output, extra, priced=False)
    if _layers(nodes) < layers:
        return plain
    for n, e, err in priced[0]:
        n.expr, n.error = e, err
    nodes[:] = priced[1]
    return fused


def _layers(nodes: list) -> int:
    """Layers ``layer_allocation`` gives ``nodes`` (in a topological order)."""
    slot: dict[int, int] = {}
    for n in nodes:
        slot[id(n)] = _slot(n, n.deps(), slot)
    top = max(slot.values(), default=-1)
    return max((top + 2) // 2, 1 if top >= 0 else 0)


def _fuse(nodes: list, output: CNode, extra: tuple, priced: bool) -> tuple[int, bool]:
    """:func:`fuse`'s passes: with ``priced`` False every fusion within :func:`fusion_ok` is
    kept (whole trees, then single leaves). Returns the number of fusions and whether the
    pricing turned down a fusion :func:`fusion_ok` allows."""
    fused = 0
    diverged = False
    changed = True
    while changed:
        changed = False
        cons = consumers(nodes, output, extra)
        gone: set[int] = set()
        slot: dict[int, int] = {}
        units = sum(mlp_units(n.encoding, n.expr) for n in nodes if n.kind == "mlp")
        d_model = 3 + sum(dims(n) for n in nodes)
        model_nonzeros: list = []     # [non-zeros, head width] estimated when first needed

        def eligible(leaf, parent_ids) -> bool:
            if leaf.kind != "mlp" or leaf is output:
                return False
            users = cons.get(id(leaf), [])
            return len(users) == 1 and users[0] is not None and id(users[0]) in parent_ids

        def absorbed(p, into_p: list) -> None:
            """``into_p`` were fused into ``p``: ``p`` now reads their leaves directly."""
            ids = {id(t) for t in into_p}
            for leaf in p.expr.leaves():
                users = [u for u in cons.get(id(leaf), []) if u is None or id(u) not in ids]
                if not any(u is p for u in users):
                    users.append(p)
                cons[id(leaf)] = users
            gone.update(ids)

        def keep(p, new_expr, parts: list, cost) -> tuple[bool, int, int]:
            """Whether to fuse ``parts`` (``p`` and the MLPs fused into it, with ``cost``
            units) into ``p`` computing ``new_expr``; and the change of units and of
            residual directions."""
            nonlocal diverged
            if not fusion_legal(p, new_expr):
                return False, 0, 0
            new_units = mlp_units(p.encoding, new_expr)
            d_units = new_units - cost
            d_dims = -sum(dims(t) for t in parts if t is not p)
            within = new_units <= max(1.5 * cost, cost + 64)
            if not priced or _slot(p, new_expr.leaves(), slot) < slot[id(p)]:
                return within, d_units, d_dims
            d_params = unit_price(d_model) * d_units + direction_price(units, d_model) * d_dims
            d_nz = mlp_nonzeros(p.encoding, new_expr) - sum(
                mlp_nonzeros(t.encoding, t.expr) for t in parts) + 2 * d_dims
            if (d_params > 0 or d_nz > 0) and not model_nonzeros:
                live = [n for n in nodes if id(n) not in gone]
                model_nonzeros.extend([estimated_nonzeros(live), head_width(live)])
            nz, heads = model_nonzeros if model_nonzeros else (0, 0)
            ok = smaller(d_params, d_nz, estimated_params(units, heads, d_model), nz)
            if ok and model_nonzeros:
                model_nonzeros[0] += d_nz
            diverged = diverged or (within and not ok)
            return ok, d_units, d_dims

        for p in list(nodes):
            if id(p) in gone:
                continue
            slot[id(p)] = _slot(p, p.deps(), slot)
            if p.kind != "mlp":
                continue
            # the tree of the inputs that compute p latest (those that can move it earlier),
            # then the whole tree
            done = False
            for critical in ((True, False) if priced else (False,)):
                tree = {id(p): p}
                expr = p.expr
                old_cost = mlp_units(p.encoding, p.expr)
                grew = True
                while grew:
                    grew = False
                    leaves = expr.leaves()
                    last = max([slot.get(id(l), -1) for l in leaves] + [-1])
                    for leaf in leaves:
                        if eligible(leaf, tree) and (not critical or slot.get(id(leaf)) == last):
                            expr = expr.substitute(leaf, leaf.expr)
                            tree[id(leaf)] = leaf
                            old_cost += mlp_units(leaf.encoding, leaf.expr)
                            grew = True
                            break
                if critical:
                    if len(tree) < 2 or _slot(p, expr.leaves(), slot) >= slot[id(p)] or \
                            not fusion_ok(p, expr, old_cost):
                        continue
                    ok = True
                    d_units = mlp_units(p.encoding, expr) - old_cost
                    d_dims = -sum(dims(t) for t in tree.values() if t is not p)
                elif len(tree) > 2:
                    ok, d_units, d_dims = keep(p, expr, list(tree.values()), old_cost)
                else:
                    ok = False
                if ok:
                    p.expr = expr
                    p.error = p.error or next((t.error for t in tree.values() if t.error),
                                              None)
                    fused += len(tree) - 1
                    absorbed(p, [t for t in tree.values() if t is not p])
                    slot[id(p)] = _slot(p, p.deps(), slot)
                    units += d_units
                    d_model += d_dims
                    changed = done = True
                    break
            if done:
                continue
            for leaf in p.expr.leaves():
                if not eligible(leaf, {id(p)}):
                    continue
                new_expr = p.expr.substitute(leaf, leaf.expr)
                old = mlp_units(p.encoding, p.expr) + mlp_units(leaf.encoding, leaf.expr)
                ok, d_units, d_dims = keep(p, new_expr, [p, leaf], old)
                if not ok:
                    continue
                p.expr = new_expr
                p.error = p.error or leaf.error
                fused += 1
                absorbed(p, [leaf])
                slot[id(p)] = _slot(p, p.deps(), slot)
                units += d_units
                d_model += d_dims
                changed = True
                break
        if changed:
            nodes[:] = reachable(output, extra)
    return fused, diverged


def convert_extra_numericals(categorical: Callable[[CNode], CNode], nodes: list) -> None:
    """An MLP with several numerical inputs that is neither affine nor built as steps over an
    affine form reads all but its largest one through ``categorical`` (the lowering's
    conversion MLP)."""
    for p in list(nodes):
        if p.kind != "mlp":
            continue
        leaves = p.expr.leaves()
        nums = [l for l in leaves if l.encoding != CATEGORICAL]
        if len(nums) <= 1:
            continue
        if p.encoding == NUMERICAL and affine_form(p.expr) is not None:
            continue
        if p.error is None and affine_steps(p.expr, leaves) is not None:
            continue       # built as steps over the affine form (graph_to_blocks)
        keep = max(nums, key=lambda l: len(l.values))
        for l in nums:
            if l is not keep:
                p.expr = p.expr.substitute(l, Expr(leaf=categorical(l)))
