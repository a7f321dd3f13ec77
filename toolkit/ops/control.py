"""``keras.ops.core``'s loops and control flow: ``scan``, ``map``, ``vectorized_map``, ``fori_loop``,
``while_loop``, ``associative_scan``, ``cond`` and ``switch``.

Control flow inside a compiled step: every backend compiles one graph of static shapes (JAX under Aesara/PyTensor,
``tf.function`` under TensorFlow), so a loop's carry keeps its shapes and dtypes, a loop's trip count is known when
the step is built (``scan``'s length, ``fori_loop``'s bounds, ``while_loop``'s ``maximum_iterations``), and a branch
chosen by a tensor computes every branch and selects one (``cond``, ``switch``): the same values on every backend,
and gradients through all of them.

Part of :class:`~toolkit.ops.Ops`, written once here; a backend with a loop construct overrides :meth:`_scan`
(its default unrolls the loop).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable

import numpy as np
import optree

from toolkit.errors import ShapeError
from toolkit.ops.tensor import INT_DTYPE

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none
#: here.
ARGUMENTS: dict[str, str] = {}


class ControlFlowOps(ABC):  # noqa: B024 (its one backend hook, _scan, has a default: the loop unrolled)
    """Mixed into :class:`~toolkit.ops.Ops`."""

    _scan_depth = 0  # > 0 while a scan's body is being built

    # --- branches --------------------------------------------------------------------------------------------------
    def cond(self, pred, true_fn: Callable, false_fn: Callable):
        """``true_fn()`` if ``pred`` else ``false_fn()`` (``keras.ops.cond``). A Python or NumPy ``pred`` calls
        one branch. A tensor ``pred`` (a scalar) calls both while the step is built and selects with
        :meth:`where` (as ``jnp.where`` would): both branches are computed, their results must have one structure,
        shapes and dtypes, and a NaN or inf in the branch not taken can still reach the gradient (0 times inf).

        Raises:
            ShapeError: a tensor ``pred`` that is not a scalar, or branches whose results differ in structure,
                shape or dtype (Keras' ValueError).
        """
        if not self.is_tensor(pred):
            return true_fn() if bool(np.asarray(pred)) else false_fn()
        return self._select(pred, [true_fn, false_fn], (), "cond", lambda p: [p, self.logical_not(p)])

    def switch(self, index, branches, *operands):
        """``branches[index](*operands)`` (``keras.ops.switch``), ``index`` clamped into ``[0, len(branches))``.
        A tensor ``index`` calls every branch and selects (as :meth:`cond`).

        Raises:
            ShapeError: a tensor ``index`` that is not a scalar, or branches whose results differ.
        """
        if not self.is_tensor(index):
            return branches[min(max(int(np.asarray(index)), 0), len(branches) - 1)](*operands)
        index = self.clip(self.wrap(self._indices(index, "switch")), 0, len(branches) - 1)
        return self._select(index, list(branches), operands, "switch",
                            lambda i: [self.equal(i, n) for n in range(len(branches))])

    def _select(self, key, branches: list, operands: tuple, name: str, masks: Callable):
        if self.shape(key) != ():
            raise ShapeError(f"{name} needs a scalar predicate or index, got shape {self.shape(key)}")
        results = [optree.tree_flatten(fn(*operands), is_leaf=self._is_array, none_is_leaf=False) for fn in branches]
        specs = {spec for _, spec in results}
        signatures = {tuple((tuple(self.shape(v)), self.dtype_of(v)) for v in leaves) for leaves, _ in results}
        if len(specs) != 1 or len(signatures) != 1:
            raise ShapeError(f"{name}'s branches must return one structure with the same shapes and dtypes; got "
                             + "; ".join(f"{spec} with {[(self.shape(v), self.dtype_of(v)) for v in leaves]}"
                                         for leaves, spec in results))
        chosen = masks(key)
        leaves = []
        for parts in zip(*(leaves for leaves, _ in results)):
            value = parts[-1]
            for mask, part in zip(chosen[-2::-1], parts[-2::-1]):
                value = self.where(mask, part, value)
            leaves.append(value)
        return optree.tree_unflatten(results[0][1], leaves)

    # --- loops -----------------------------------------------------------------------------------------------------
    def map(self, f: Callable, xs):
        """``f`` of each slice of ``xs`` along axis 0, stacked (``keras.ops.map``; ``xs`` and ``f``'s result may be
        pytrees): one loop in the graph (:meth:`scan`)."""
        return self.scan(lambda carry, x: (carry, f(x)), (), xs)[1]

    def vectorized_map(self, function: Callable, elements):
        """``function`` of each slice of ``elements`` along axis 0, stacked (``keras.ops.vectorized_map``). The
        toolkit runs it as :meth:`map` (one loop), which gives ``jax.vmap``'s values."""
        return self.map(function, elements)

    def fori_loop(self, lower: int, upper: int, body_fun: Callable, init_val):
        """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``, from ``init_val`` (``keras.ops.fori_loop``);
        ``i`` is an int32 scalar tensor. One loop in the graph (:meth:`scan`), differentiable.

        Raises:
            ShapeError: bounds that are tensors (the trip count must be known when the step is built), or a body
                that changes the value's structure, shapes or dtypes.
        """
        if self.is_tensor(lower) or self.is_tensor(upper):
            raise ShapeError("fori_loop's lower and upper must be Python or NumPy integers (the trip count is part of "
                             "the compiled step); for a tensor bound, use while_loop with maximum_iterations")
        lower, upper = int(np.asarray(lower)), int(np.asarray(upper))
        if upper <= lower:
            return init_val
        steps = np.arange(lower, upper, dtype=INT_DTYPE)
        return self.scan(lambda val, i: (body_fun(i, val), None), init_val, steps)[0]

    def while_loop(self, cond: Callable, body: Callable, loop_vars, maximum_iterations: int | None = None):
        """``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` (``keras.ops.while_loop``; a ``loop_vars``
        that is not a tuple or list is passed as one argument), at most ``maximum_iterations`` times.

        With loop variables that are all constants (Python or NumPy values) and a condition that is not a tensor,
        it runs in Python. Otherwise ``maximum_iterations`` is needed: the loop is a :meth:`scan` of that many
        steps in which each step after the condition fails keeps the variables as they were (so it is
        differentiable on every backend; the body still runs, and a NaN it makes there can reach the gradient).

        Raises:
            ShapeError: tensor loop variables without ``maximum_iterations``, or a body that changes their
                structure, shapes or dtypes.
        """
        is_tuple = isinstance(loop_vars, (list, tuple))
        args = (lambda v: tuple(v)) if is_tuple else (lambda v: (v,))
        packed = lambda v: type(loop_vars)(v) if is_tuple else v  # noqa: E731
        tensors = any(self.is_tensor(v) for v in optree.tree_leaves(loop_vars))
        if not tensors:
            count, values = 0, loop_vars
            while maximum_iterations is None or count < maximum_iterations:
                going = cond(*args(values))
                if self.is_tensor(going):
                    break
                if not bool(np.asarray(going)):
                    return values
                values, count = packed(body(*args(values))), count + 1
            if maximum_iterations is not None and count >= maximum_iterations:
                return values
            loop_vars = values
        if maximum_iterations is None:
            raise ShapeError("while_loop over tensors needs maximum_iterations: compiled steps have a trip count "
                             "known when they are built (the loop runs that many masked steps)")
        steps = int(maximum_iterations)
        if steps < 1:
            return loop_vars
        init_leaves, spec = optree.tree_flatten(loop_vars, is_leaf=self._is_array)
        init_leaves = [self._tensor(v) for v in init_leaves]

        def step(carry, _):
            values, going = carry
            values = optree.tree_unflatten(spec, values)
            going = self.logical_and(going, cond(*args(values)))
            new = optree.tree_leaves(packed(body(*args(values))), is_leaf=self._is_array)
            kept = [self.where(going, self.cast(self._tensor(n), self.dtype_of(o)), o)
                    for n, o in zip(new, optree.tree_leaves(values, is_leaf=self._is_array))]
            return (kept, going), None

        (final, _), _ = self.scan(step, (init_leaves, self.wrap(self.constant(np.asarray(True)))), length=steps)
        return optree.tree_unflatten(spec, final)

    def associative_scan(self, f: Callable, elems, reverse: bool = False, axis: int = 0):
        """The running ``f``-reduction of ``elems`` along ``axis`` (``keras.ops.associative_scan``, JAX's
        ``lax.associative_scan``): ``[e0, f(e0, e1), f(f(e0, e1), e2), ...]``, from the end when ``reverse``.
        ``f`` must be associative; it is applied as JAX applies it (the same odd/even recursion, ``log2(n)``
        levels of whole-array calls), so the results round as Keras' do. ``elems`` may be a pytree.

        Raises:
            ShapeError: leaves without one common static size along ``axis``.
        """
        leaves, spec = optree.tree_flatten(elems, is_leaf=self._is_array)
        leaves = [self._tensor(v) for v in leaves]
        axes = [self._axes(v, axis, "associative_scan")[0] for v in leaves]
        leaves = [self._to_front(v, a) for v, a in zip(leaves, axes)]
        sizes = {self.shape(v)[0] for v in leaves}
        if len(sizes) != 1 or None in sizes:
            raise ShapeError(f"associative_scan needs elems with one static size along axis {axis}; got {sizes}")
        if reverse:
            leaves = [v[::-1] for v in leaves]

        def combine(a: list, b: list) -> list:
            return optree.tree_leaves(f(optree.tree_unflatten(spec, a), optree.tree_unflatten(spec, b)),
                                      is_leaf=self._is_array)

        def scanned(elems: list) -> list:
            n = self.shape(elems[0])[0]
            if n < 2:
                return elems
            reduced = combine([e[0:-1:2] for e in elems], [e[1::2] for e in elems])
            odd = scanned(reduced)
            if n % 2 == 0:
                even = combine([o[:-1] for o in odd], [e[2::2] for e in elems])
            else:
                even = combine(odd, [e[2::2] for e in elems])
            even = [self.concatenate([e[0:1], v], axis=0) for e, v in zip(elems, even)]
            return [self._interleave(a, b) for a, b in zip(even, odd)]

        found = scanned(leaves)
        if reverse:
            found = [v[::-1] for v in found]
        return optree.tree_unflatten(spec, [self._to_front(v, a, back=True) for v, a in zip(found, axes)])

    def _interleave(self, a, b):
        """``a[0], b[0], a[1], b[1], ...`` along axis 0 (``a`` one longer than ``b`` or as long)."""
        rest = self.shape(a)[1:]
        extra = self.shape(a)[0] - self.shape(b)[0]
        pairs = self.stack([a[:self.shape(b)[0]], b], axis=1)
        woven = self.reshape(pairs, (2 * self.shape(b)[0], *rest))
        return self.concatenate([woven, a[-1:]], axis=0) if extra else woven

    def _to_front(self, x, axis: int, back: bool = False):
        """``x`` with ``axis`` moved to the front (or, ``back=True``, the front axis moved back to ``axis``)."""
        if axis == 0:
            return x
        order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(self.shape(x))))
        if not back:
            order = [axis] + [a for a in range(len(self.shape(x))) if a != axis]
        return self.transpose(x, order)

    def scan(self, f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, unroll: int = 1):
        """Scan ``f`` over the leading axis of ``xs`` while carrying a state (``keras.ops.scan``, JAX's
        ``lax.scan``)::

            carry, ys = init, []
            for x in xs:                   # xs[length - 1], ..., xs[0] when reverse
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)        # in xs' order, also when reverse

        ``init``, ``xs`` and ``f``'s results may be pytrees of tensors (``y`` may be None: nothing is stacked);
        ``xs=None`` scans ``length`` times with ``x`` None. The carry keeps ``init``'s structure, shapes and dtypes.
        Each backend runs it as one loop in the graph (the step is built and compiled once: compile time does not
        grow with ``length``), and differentiates through it. ``unroll`` (Keras' argument: an int >= 1, or True for
        all of ``length``) is how many iterations one loop iteration runs: JAX (the Aesara backend) unrolls that many;
        TensorFlow unrolls the whole loop into the graph when ``unroll`` covers ``length`` (faster steps on short
        sequences, tracing that grows with the length), else runs one step per ``tf.while_loop`` iteration.

        Raises:
            ShapeError, DTypeError: ``xs`` without a common leading size (or neither ``xs`` nor ``length``), or a
                carry from ``f`` whose structure, shapes or dtypes differ from ``init``'s.
            ModelStateError: ``f`` draws noise or updates model state (once per loop, not once per step: refused).
        """
        init_leaves, init_spec = optree.tree_flatten(init, is_leaf=self._is_array)
        init_natives = [self._native(v) for v in init_leaves]
        xs_leaves, xs_spec = optree.tree_flatten(xs, is_leaf=self._is_array)
        xs_natives = [self._native(v) for v in xs_leaves]
        sizes = {self.native_shape(v)[0] if self.native_shape(v) else None for v in xs_natives}
        if length is not None:
            sizes.add(length)
        if (len(sizes) != 1 or None in sizes or not isinstance(next(iter(sizes)), (int, np.integer))
                or next(iter(sizes)) < 1):
            raise ShapeError(f"scan needs xs with one known leading size >= 1 or a length, got leading sizes "
                             f"{sorted(sizes, key=str)} (length={length!r})")
        length = int(next(iter(sizes)))
        if isinstance(unroll, bool):
            unroll = length if unroll else 1
        if not isinstance(unroll, (int, np.integer)) or unroll < 1:
            raise ValueError(f"scan's unroll must be a bool or an int >= 1, got {unroll!r}")
        expected = [(self.native_shape(v), self.native_dtype(v)) for v in init_natives]
        y_spec = []

        def step(carry: list, x: list) -> tuple[list, list]:
            """``f`` on natives: the backend's loop body."""
            self._scan_depth += 1
            try:
                new_carry, y = f(optree.tree_unflatten(init_spec, [self.wrap(v) for v in carry]),
                                 optree.tree_unflatten(xs_spec, [self.wrap(v) for v in x]))
            finally:
                self._scan_depth -= 1
            carry_leaves, carry_spec = optree.tree_flatten(new_carry, is_leaf=self._is_array)
            carry = [self._native(v) for v in carry_leaves]
            found = [(self.native_shape(v), self.native_dtype(v)) for v in carry]
            if carry_spec != init_spec or found != expected:
                raise ShapeError(f"scan's f must return a carry like init: {init_spec} with (shape, dtype) "
                                 f"{expected}; got {carry_spec} with {found}")
            y_leaves, spec = optree.tree_flatten(y, is_leaf=self._is_array)
            y_spec[:] = [spec]
            return carry, [self._native(v) for v in y_leaves]

        carry, ys = self._scan(step, init_natives, xs_natives, length, bool(reverse), min(int(unroll), length))
        return (optree.tree_unflatten(init_spec, [self.wrap(v) for v in carry]),
                optree.tree_unflatten(y_spec[0], [self.wrap(v) for v in ys]))

    def _scan(self, step: Callable, init: list, xs: list, length: int, reverse: bool,
              unroll: int) -> tuple[list, list]:
        """The loop under :meth:`scan`, on natives: ``step(carry, x) -> (carry, ys)`` on lists of natives; returns
        the last carry and each ``ys`` stacked along a new axis 0, in ``xs``' order. This default unrolls it (one
        copy of the step per iteration); a backend with a loop construct overrides it."""
        carry, outputs = init, []
        for t in (range(length - 1, -1, -1) if reverse else range(length)):
            carry, y = step(carry, [self._index(x, t) for x in xs])
            outputs.append(y)
        if reverse:
            outputs.reverse()
        return carry, [self.stack([y[i] for y in outputs]).native for i in range(len(outputs[0]))]
