"""Stage 2 (graph), the passes over the lowered nodes, in the order ``build_graph`` runs them.

* :func:`numerical_where_smaller` -- the encoding pass (``compiler/encoding.py`` rule 5);
* :func:`fuse` -- trees of single-consumer MLPs become one MLP;
* :func:`convert_extra_numericals` -- an MLP left with several numerical inputs it cannot
  read gets conversion MLPs for all but one.

Each pass changes the nodes in place and prices its choices with :mod:`compiler.mlp_pricing`.
"""

from __future__ import annotations

import math
from typing import Callable

from .encoding import CATEGORICAL, NUMERICAL, explicit_encoding
from .expr import Expr, affine_form, affine_steps, int_values
from .mlp_pricing import FUSE_LIMIT, affine_mlp, mlp_units
from .nodes import CNode

__all__ = ["consumers", "reachable", "numerical_where_smaller", "fuse",
           "convert_extra_numericals"]


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


def numerical_where_smaller(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Encoding pass: give an integer-valued MLP s-op a **numerical** encoding (one residual
    direction instead of one per value) where every reader can read it as a number and the
    model gets smaller (``compiler/encoding.py`` rule 5). Returns the number of s-ops changed.

    Candidates: categorical MLP nodes (maps, sequence maps, selector widths) and mean
    aggregates that copy one value per query (never average different values: the head then
    writes the number instead of its one-hot) with no encoding annotation, whose values are all integers (``|v| <= NUMERICAL_INT_LIMIT``: a discretising
    MLP reads them with gaps >= 1, an affine MLP adds them exactly in float64), that are not the
    program's output and do not flag an error. Readers allowed: an MLP that then reads at most
    one numerical input, or is itself an affine numerical MLP of numbers; a numerical mean
    aggregate reading it as its values. A select (key or query), a max/min aggregate, a
    categorical aggregate or the output need the categorical encoding, so their inputs stay.

    Nodes are visited from the output down (each reader's encoding is decided before its
    inputs'), and a change is kept when the parameters saved by the fewer residual directions
    exceed the parameters of the extra MLP units (the readers' :func:`mlp_units` before and
    after), with the model's current size as the price of one direction and one unit."""
    cons = consumers(nodes, output, extra)
    roots = {id(output)} | {id(r) for r in extra}

    def dims(n: CNode) -> int:
        if n.kind == "full":
            return 0
        return len(n.values) if n.encoding == CATEGORICAL else 1

    units = {id(p): mlp_units(p.encoding, p.expr) for p in nodes if p.kind == "mlp"}
    d_model = 3 + sum(dims(n) for n in nodes)
    changed = 0
    for n in reversed(nodes):
        copy = (n.kind == "aggregate" and n.reduction == "mean" and not n.may_average
                and n.count_check is None)
        if ((n.kind != "mlp" and not copy) or n.encoding != CATEGORICAL or n.internal
                or n.unbounded or id(n) in roots or n.error is not None or len(n.values) < 2
                or (n.ir is not None and explicit_encoding(n.ir) is not None)
                or not int_values(n.values)):
            continue
        readers = cons.get(id(n), [])
        if not readers or any(r is None for r in readers):
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
            saved = (len(n.values) - 1) * (2 * total_units + d_model)
            if copy:        # the head's value / output weights: one column, not one per value
                saved += 2 * d_model * (len(n.values) - 1)
            ok = saved > 2 * d_model * extra_units
        if not ok:
            n.encoding = CATEGORICAL
            continue
        units.update(new_units)
        d_model -= len(n.values) - 1
        changed += 1
    return changed


def fusion_ok(p: CNode, new_expr: Expr, old_cost: int) -> bool:
    new_leaves = new_expr.leaves()
    if any(l.unbounded for l in new_leaves) and not (p.encoding == NUMERICAL and affine_form(
            new_expr)):
        return False
    nums = [l for l in new_leaves if l.encoding != CATEGORICAL]
    if len(nums) > 1 and not (p.encoding == NUMERICAL and affine_form(new_expr)) and \
            affine_steps(new_expr, new_leaves) is None:
        return False
    cat_rows = math.prod(len(l.values) for l in new_leaves if l.encoding == CATEGORICAL)
    if cat_rows > FUSE_LIMIT:
        return False
    return mlp_units(p.encoding, new_expr, new_leaves) <= max(1.5 * old_cost, old_cost + 64)


def fuse(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Fuse single-consumer MLP nodes into their MLP consumer. Returns the number of fusions.

    For each MLP, first the whole tree of single-consumer MLPs below it is tried at once (so
    ``f(a) + g(a)`` becomes one MLP of ``a``), then single leaves, greedily; a fusion is kept
    when it does not blow up the MLP (at most 1.5x the units of the separate MLPs). Passes
    over the nodes in topological order repeat until nothing fuses; within a pass the
    consumer table is updated per fusion (not rebuilt), so a chain of n maps fuses in O(n)."""
    fused = 0
    changed = True
    while changed:
        changed = False
        cons = consumers(nodes, output, extra)
        gone: set[int] = set()

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

        for p in list(nodes):
            if p.kind != "mlp" or id(p) in gone:
                continue
            # whole tree
            tree = {id(p): p}
            expr = p.expr
            old_cost = mlp_units(p.encoding, p.expr)
            grew = True
            while grew:
                grew = False
                for leaf in expr.leaves():
                    if eligible(leaf, tree):
                        expr = expr.substitute(leaf, leaf.expr)
                        tree[id(leaf)] = leaf
                        old_cost += mlp_units(leaf.encoding, leaf.expr)
                        grew = True
                        break
            if len(tree) > 2 and fusion_ok(p, expr, old_cost):
                p.expr = expr
                p.error = p.error or next((t.error for t in tree.values() if t.error), None)
                fused += len(tree) - 1
                absorbed(p, [t for t in tree.values() if t is not p])
                changed = True
                continue
            for leaf in p.expr.leaves():
                if not eligible(leaf, {id(p)}):
                    continue
                new_expr = p.expr.substitute(leaf, leaf.expr)
                old = mlp_units(p.encoding, p.expr) + mlp_units(leaf.encoding, leaf.expr)
                if not fusion_ok(p, new_expr, old):
                    continue
                p.expr = new_expr
                p.error = p.error or leaf.error
                fused += 1
                absorbed(p, [leaf])
                changed = True
                break
        if changed:
            nodes[:] = reachable(output, extra)
    return fused


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
