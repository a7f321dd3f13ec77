"""``keras.ops``' transformations of functions: ``vectorize`` (NumPy's generalized ufuncs, as ``jax.numpy.vectorize``)
and ``custom_gradient`` (a function whose gradient the user writes).

``vectorize`` is written once over :meth:`~toolkit.ops.control.ControlFlowOps.map` (one loop in the graph,
differentiable on every backend). ``custom_gradient`` needs one primitive, :meth:`FunctionalOps._custom_gradient`:
TensorFlow's ``tf.custom_gradient``; on the Theano family an op whose gradient is the user's function (and, inside a
loop whose step JAX differentiates, a ``jax.custom_vjp`` running the same graph), so that the gradient the trainers
take (the tape's, ``grad``'s) is the custom one, loops included.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
"""

from __future__ import annotations

import functools
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import optree

from toolkit.errors import ArgumentError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"_custom_gradient": "T"}

#: A generalized ufunc signature, ``"(m,n),(n)->(m)"`` (NumPy's and JAX's grammar).
_DIMENSIONS = r"\((?:\w+(?:,\w+)*)?\)"
_SIGNATURE = re.compile(rf"^{_DIMENSIONS}(?:,{_DIMENSIONS})*->{_DIMENSIONS}(?:,{_DIMENSIONS})*$")


class FunctionalOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    # --- vectorize -------------------------------------------------------------------------------------------------
    def vectorize(self, pyfunc: Callable, *, excluded=None, signature: str | None = None) -> Callable:
        """``pyfunc`` made to apply over the leading (loop) axes of its arguments, which broadcast together
        (``keras.ops.vectorize``, as ``jax.numpy.vectorize``). Without ``signature``, ``pyfunc`` receives scalars
        (and may return any shape, which goes after the loop axes); ``signature`` (``"(m,n),(n)->(m)"``) names the
        core axes each argument and result keeps. ``excluded``: the positions (ints) and keyword names (strs) of
        arguments passed to ``pyfunc`` as they are; ``None`` arguments are too. The loop is one :meth:`map` over
        the broadcast loop axes flattened (arguments without loop axes are not copied), so the result and its
        gradient are those of ``pyfunc`` on each slice.

        Raises:
            ArgumentError: ``pyfunc`` not callable, a malformed ``excluded`` or ``signature``; when called, keyword
                arguments that are not in ``excluded`` (JAX would drop them), or not one argument per signature
                entry.
            ShapeError: when called, loop axes of unknown or unbroadcastable sizes, core axes of inconsistent
                sizes, or results that do not fit ``signature``.
        """
        if not callable(pyfunc):
            raise ArgumentError(f"ops.vectorize needs a callable pyfunc; got {pyfunc!r}")
        excluded = frozenset(() if excluded is None else excluded)
        if any(isinstance(e, bool) or not isinstance(e, (int, str)) or isinstance(e, int) and e < 0
               for e in excluded):
            raise ArgumentError(f"ops.vectorize: excluded holds argument positions (ints >= 0) and keyword names "
                                f"(strs); got excluded={set(excluded)!r}")
        cores = None
        if signature is not None:
            if not isinstance(signature, str) or not _SIGNATURE.match(signature.replace(" ", "")):
                raise ArgumentError(f"ops.vectorize: signature={signature!r} is not a generalized ufunc signature "
                                    "such as '(m,n),(n)->(m)'")
            cores = [[tuple(re.findall(r"\w+", group)) for group in re.findall(_DIMENSIONS, side)]
                     for side in signature.replace(" ", "").split("->")]

        @functools.wraps(pyfunc)
        def vectorized(*args, **kwargs):
            return self._vectorized(pyfunc, excluded, cores, signature, args, kwargs)

        return vectorized

    def _vectorized(self, pyfunc, excluded, cores, signature, args: tuple, kwargs: dict):
        dynamic_keywords = sorted(set(kwargs) - excluded)
        if dynamic_keywords:
            raise ArgumentError(f"ops.vectorize maps positional arguments only; keyword argument(s) "
                                f"{dynamic_keywords} would not be mapped: pass them by position or name them in "
                                "excluded")
        fixed = {i for i, a in enumerate(args) if i in excluded or a is None}
        mapped = [i for i in range(len(args)) if i not in fixed]
        in_cores = cores[0] if cores is not None else [()] * len(mapped)
        if len(in_cores) != len(mapped):
            raise ArgumentError(f"ops.vectorize with signature={signature!r} takes {len(in_cores)} mapped "
                                f"argument(s); got {len(mapped)} (excluded and None arguments not counted)")

        def numeric(value) -> bool:
            return isinstance(value, (int, float, bool, np.number)) and not isinstance(value, np.ndarray)

        values = [args[i] if numeric(args[i]) and not core else self._tensor(args[i])
                  for i, core in zip(mapped, in_cores)]
        sizes: dict[str, int] = {}
        loops = []
        for value, core in zip(values, in_cores):
            shape = tuple(np.shape(value)) if numeric(value) else tuple(self.shape(value))
            if len(shape) < len(core):
                raise ShapeError(f"ops.vectorize: an argument of shape {shape} has fewer axes than its core "
                                 f"dimensions {core} (signature={signature!r})")
            self._core_sizes(sizes, shape[len(shape) - len(core):], core, signature)
            loops.append(shape[:len(shape) - len(core)])
        if any(size is None for shape in loops for size in shape):
            raise ShapeError(f"ops.vectorize needs loop axes of static sizes (one map over them, of a length known "
                             f"when the step is built); got arguments with loop axes {loops} (a data-parallel step's "
                             "uneven shards have a batch axis of unknown size)")
        try:
            loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
        except ValueError:
            raise ShapeError(f"ops.vectorize: the loop axes of the arguments, {loops}, do not broadcast "
                             f"(signature={signature!r})") from None
        total = int(np.prod(loop))

        def call(*slices):
            full = list(args)
            for i, value in zip(mapped, slices):
                full[i] = value
            out = pyfunc(*full, **kwargs)
            if cores is not None:
                out = self._check_outputs(out, sizes, cores[1], signature)
            return out

        if total == 0:  # no slice to call pyfunc on: its results' shapes from one call on zeros, then empty arrays
            probe = call(*[v if numeric(v) else self.zeros(tuple(self.shape(v))[len(loops[k]):], self.dtype_of(v))
                           for k, v in enumerate(values)])
            return optree.tree_map(lambda r: self.zeros((*loop, *self.shape(r)), self.dtype_of(r)), probe,
                                   is_leaf=self._is_array)
        looped = [k for k, shape in enumerate(loops) if int(np.prod(shape)) > 1]
        if total == 1 or not looped:  # nothing to loop over: one call, the loop axes added
            fixed_values = [v if numeric(v) else self.reshape(v, tuple(self.shape(v))[len(loops[k]):])
                            for k, v in enumerate(values)]
            return self._with_loop_axes(call(*fixed_values), loop, 0)
        flat = [self.reshape(self.broadcast_to(values[k], (*loop, *self.shape(values[k])[len(loops[k]):])),
                             (total, *self.shape(values[k])[len(loops[k]):])) for k in looped]
        unlooped = {k: (v if numeric(v) else self.reshape(v, tuple(self.shape(v))[len(loops[k]):]))
                    for k, v in enumerate(values) if k not in looped}

        def one(slices):
            slices = iter(slices)
            return call(*[unlooped[k] if k in unlooped else next(slices) for k in range(len(values))])

        return self._with_loop_axes(self.map(one, flat), loop, 1)

    def _with_loop_axes(self, results, loop: tuple, flattened: int):
        """Each array of ``results`` with its first ``flattened`` axes (0 or 1) replaced by ``loop``."""
        return optree.tree_map(lambda r: self.reshape(self._tensor(r), (*loop, *self.shape(r)[flattened:])),
                               results, is_leaf=self._is_array)

    @staticmethod
    def _core_sizes(sizes: dict, shape: tuple, core: tuple, signature) -> None:
        for name, size in zip(core, shape):
            if size is not None and sizes.setdefault(name, size) != size:
                raise ShapeError(f"ops.vectorize: core dimension {name!r} is {sizes[name]} in one argument and "
                                 f"{size} in another (signature={signature!r})")

    def _check_outputs(self, out, sizes: dict, out_cores: list, signature):
        """``pyfunc``'s results checked against the signature's core dimensions, with their static sizes."""
        if len(out_cores) > 1 and not isinstance(out, tuple):
            raise ShapeError(f"ops.vectorize: signature={signature!r} has {len(out_cores)} results; pyfunc returned "
                             f"one ({type(out).__name__}), not a tuple")
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_cores):
            raise ShapeError(f"ops.vectorize: signature={signature!r} has {len(out_cores)} results; pyfunc returned "
                             f"{len(outs)}")
        found, checked = dict(sizes), []
        for value, core in zip(outs, out_cores):
            value = self._tensor(value)
            shape = tuple(self.shape(value))
            if len(shape) != len(core):
                raise ShapeError(f"ops.vectorize: a result of shape {shape} does not match its core dimensions "
                                 f"{core} (signature={signature!r})")
            self._core_sizes(found, shape, core, signature)
            # A size the framework lost (Aesara's dot of a matrix and a vector) is the signature's.
            static = tuple(found.get(name) if size is None else size for name, size in zip(core, shape))
            checked.append(self.reshape(value, static) if static != shape and None not in static else value)
        return tuple(checked) if isinstance(out, tuple) else checked[0]

    # --- custom_gradient -------------------------------------------------------------------------------------------
    def custom_gradient(self, f: Callable) -> Callable:
        """``f`` with a gradient of the user's (``keras.ops.custom_gradient``, as ``tf.custom_gradient`` and
        ``jax.custom_gradient``): ``f(*args)`` returns ``(output, grad_fn)``; the returned function gives
        ``output``, and the gradient that reaches ``args`` (the trainers' included) is ``grad_fn``'s, from the
        gradient ``upstream`` of ``output``.

        ``grad_fn`` is called as Keras calls it on TensorFlow and JAX, ``grad_fn(upstream)`` (one ``upstream`` per
        array of ``output``, positionally), or, where it has a keyword-only ``upstream`` without default (Keras'
        PyTorch form, ``def grad(*args, upstream)``), as ``grad_fn(*args, upstream=upstream)`` (``upstream`` a tuple
        for several outputs). It returns one gradient per array of ``args`` (flattened; a single array may come
        alone; None for none). Only the arrays among ``args`` get a gradient: a tensor ``f`` reads from elsewhere
        (a closure, a parameter) is a constant to it, as in TensorFlow and JAX. Keyword arguments go to ``f`` as
        they are and must not be arrays.

        Raises:
            ArgumentError: ``f`` not callable; when called, array keyword arguments, or ``f`` not returning
                ``(output, grad_fn)``.
            ShapeError: while differentiating, ``grad_fn`` returning another number of gradients than ``args`` has
                arrays, or a gradient of another shape than its argument.
        """
        if not callable(f):
            raise ArgumentError(f"ops.custom_gradient needs a callable f; got {f!r}")

        @functools.wraps(f)
        def with_gradient(*args, **kwargs):
            if any(self._is_array(v) for v in optree.tree_leaves(kwargs)):
                raise ArgumentError(f"ops.custom_gradient: keyword arguments {sorted(kwargs)} hold arrays; pass "
                                    "arrays positionally (only they get a gradient)")
            leaves, spec = optree.tree_flatten(args, is_leaf=self._is_array)
            positions = [i for i, leaf in enumerate(leaves) if self._is_array(leaf)]
            found: dict = {}

            def forward(natives: list) -> tuple[list, Callable]:
                inputs = [self.wrap(v) for v in natives]
                given = list(leaves)
                for i, value in zip(positions, inputs):
                    given[i] = value
                given_args = optree.tree_unflatten(spec, given)
                result = f(*given_args, **kwargs)
                if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[1])):
                    raise ArgumentError(f"ops.custom_gradient: f must return (output, grad_fn); got "
                                        f"{type(result).__name__}")
                output, grad_fn = result
                out_leaves, found["spec"] = optree.tree_flatten(output, is_leaf=self._is_array)
                outs = [self._native(v) for v in out_leaves]

                def backward(upstream: list) -> list:
                    grads = self._call_grad_fn(grad_fn, given_args, [self.wrap(u) for u in upstream],
                                               found["spec"].num_leaves == 1 and found["spec"].num_nodes == 1)
                    return self._checked_gradients(grads, inputs)

                return outs, backward

            outs = self._custom_gradient([self._native(leaves[i]) for i in positions], forward)
            return optree.tree_unflatten(found["spec"], outs)

        return with_gradient

    @staticmethod
    def _call_grad_fn(grad_fn: Callable, args: tuple, upstream: list, single: bool):
        try:
            parameter = inspect.signature(grad_fn).parameters.get("upstream")
        except (TypeError, ValueError):
            parameter = None
        if (parameter is not None and parameter.kind == inspect.Parameter.KEYWORD_ONLY
                and parameter.default is inspect.Parameter.empty):
            return grad_fn(*args, upstream=upstream[0] if single else tuple(upstream))
        return grad_fn(*upstream)

    def _checked_gradients(self, grads, inputs: list) -> list:
        """``grad_fn``'s result as one native (or None) per input, each in its input's dtype."""
        grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
        if len(grads) != len(inputs):
            raise ShapeError(f"ops.custom_gradient: grad_fn returned {len(grads)} gradient(s) for {len(inputs)} array "
                             "argument(s) of f")
        checked = []
        for grad, x in zip(grads, inputs):
            if grad is None:
                checked.append(None)
                continue
            grad = self._tensor(grad)
            found, wanted = tuple(self.shape(grad)), tuple(self.shape(x))
            if len(found) != len(wanted) or any(None not in (a, b) and a != b for a, b in zip(found, wanted)):
                raise ShapeError(f"ops.custom_gradient: grad_fn returned a gradient of shape {found} for an argument "
                                 f"of shape {wanted}")
            if found != wanted and None not in wanted:  # sizes the framework's gradient graph lost (Aesara's)
                grad = self.reshape(grad, wanted)
            checked.append(self._native(grad, self.dtype_of(x)))
        return checked

    @abstractmethod
    def _custom_gradient(self, inputs: list, forward: Callable) -> list:
        """``forward(inputs)``'s outputs (a list of natives), whose gradient with respect to ``inputs`` is the one
        ``forward`` gives with them: ``forward(natives) -> (outputs, backward)``, ``backward(upstream)`` (a native
        per output) returning a native or None (no gradient) per input. ``forward`` is called on the natives the
        framework's differentiation sees as the inputs."""
