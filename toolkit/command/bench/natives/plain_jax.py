"""The bench's model in plain JAX, ``jax-jit``: :class:`JaxOps`, whose methods are single ``jax.numpy`` and ``jax.lax``
calls, a ``jax.value_and_grad`` of the mean loss and an SGD update in one ``jax.jit`` with the parameters and state
donated. The ceiling for any JAX-linker path: no engine graph in between. Also the JAX matmul that measures the
machine's peak, and a step's matmuls and convolutions alone in JAX.

Imported (by :mod:`toolkit.command.bench.natives.theano`) once the engine has started JAX with the logical devices
asked for and float64 enabled.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from toolkit.command.bench.measure import Batches
from toolkit.nn.context import MIX32_STEPS, UNIFORM_BITS
from toolkit.nn.model import batch
from toolkit.ops.interface import ARGUMENTS, Ops
from toolkit.ops.window_shapes import check_conv, check_matmul, window


def matmul(a: np.ndarray, b: np.ndarray):
    """A call that computes ``a @ b`` with ``jax.jit`` on JAX's first device and waits for the result.

    Args:
        a, b: NumPy matrices, placed on the device once, here.

    Returns:
        A function of no arguments, timed by :func:`toolkit.command.flops.matmul_peak`.
    """
    ja, jb = jax.device_put(a), jax.device_put(b)
    product = jax.jit(lambda p, q: p @ q)
    return lambda: product(ja, jb).block_until_ready()


def products(found: list, operands: list, cotangents: list, dtype: str, ops: Ops | None = None):
    """A call that runs a step's matmuls and convolutions alone (:func:`toolkit.command.flops.products_alone`) in
    plain JAX on its first device: one ``jax.jit`` of their forward and ``jax.vjp`` for both operands of each.

    Args:
        found: the step's products (:class:`toolkit.command.flops.Product`), in the order they ran.
        operands: each product's two operands, NumPy arrays.
        cotangents: each product's output cotangent, NumPy arrays.
        dtype: the computation dtype.
        ops: the JAX ops that compute them (default :class:`JaxOps`: ``jax.numpy`` and ``lax`` as they are).

    Returns:
        A function of no arguments, timed by :func:`toolkit.command.flops.products_alone`.
    """
    ops, device = ops or JaxOps(dtype), jax.devices()[0]

    def forward(operands):
        return [ops.call(product.apply, a, b) for product, (a, b) in zip(found, operands)]

    def gradients(operands, cotangents):
        # The outputs are returned too: the gradients of a product do not read them, and unreturned, XLA would drop
        # the forward products as dead code.
        outputs, pullback = jax.vjp(forward, operands)
        return outputs, pullback(cotangents)[0]

    run, placed = jax.jit(gradients), jax.device_put((operands, cotangents), device)
    return lambda: jax.block_until_ready(run(*placed))


class JaxJit:
    """The model in plain JAX: ``jax.jit`` of ``value_and_grad`` and the SGD update, parameters and state donated
    (updated in place), the batches placed on the device once (a :class:`~toolkit.command.bench.measure.Runner`).

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        dtype: the computation dtype.
        lr: SGD's learning rate.
    """

    devices_used = 1

    def __init__(self, model, params, state, batches: Batches, dtype: str, lr: float) -> None:
        ops, device = JaxOps(dtype), jax.devices()[0]
        self._params = {k: jax.device_put(np.asarray(v, dtype), device) for k, v in params.items()}
        self._state = {k: jax.device_put(np.asarray(v, dtype), device) for k, v in state.items()}
        self._inputs = [jax.device_put(batches[i], device) for i in range(len(batches))]
        self._next = 0

        def loss(params, state, x, y):
            losses, new_state, _ = model.train_losses(ops, params, batch(x, None, state), y)
            return jnp.mean(losses), new_state

        def step(params, state, x, y):
            (value, new_state), grads = jax.value_and_grad(loss, has_aux=True)(params, state, x, y)
            return {k: p - lr * grads[k] for k, p in params.items()}, new_state, value

        self._step = jax.jit(step, donate_argnums=(0, 1))

    def run(self, steps: int) -> float:
        for _ in range(steps):
            self._params, self._state, loss = self._step(self._params, self._state, *self._inputs[self._next])
            self._next = (self._next + 1) % len(self._inputs)
        return float(loss)

    def params(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in {**self._params, **self._state}.items()}


class JaxOps(Ops):
    """The neutral ops as single ``jax.numpy`` / ``jax.lax`` calls: what a JAX user writes for each.

    Its methods are :class:`~toolkit.ops.Ops`' (their names, arguments and meanings documented there), only those
    the bench's models use; any other op raises ``NotImplementedError``.

    Args:
        dtype: the computation dtype.
    """

    def is_native(self, value):
        return isinstance(value, jax.Array)

    def constant(self, value):
        return jnp.asarray(value)

    def native_dtype(self, value):
        return value.dtype.name

    def native_shape(self, value):
        return tuple(value.shape)

    def native_cast(self, value, dtype):
        return value.astype(dtype)

    def add(self, x1, x2):
        return x1 + x2

    def _subtract(self, x1, x2):
        return x1 - x2

    def multiply(self, x1, x2):
        return x1 * x2

    def divide(self, x1, x2):
        return x1 / x2

    def floor_divide(self, x1, x2):
        return jnp.floor_divide(x1, x2)

    def mod(self, x1, x2):
        return jnp.mod(x1, x2)

    def power(self, x1, x2):
        return jnp.power(x1, x2)

    def negative(self, x):
        return -x

    def abs(self, x):
        return jnp.abs(x)

    def maximum(self, x1, x2):
        return jnp.maximum(x1, x2)

    def minimum(self, x1, x2):
        return jnp.minimum(x1, x2)

    def greater(self, x1, x2):
        return x1 > x2

    def greater_equal(self, x1, x2):
        return x1 >= x2

    def less(self, x1, x2):
        return x1 < x2

    def less_equal(self, x1, x2):
        return x1 <= x2

    def equal(self, x1, x2):
        return x1 == x2

    def not_equal(self, x1, x2):
        return x1 != x2

    def logical_and(self, x1, x2):
        return jnp.logical_and(x1, x2)

    def logical_or(self, x1, x2):
        return jnp.logical_or(x1, x2)

    def logical_not(self, x):
        return jnp.logical_not(x)

    def where(self, condition, x1, x2):
        return jnp.where(condition, x1, x2)

    def relu(self, x):
        return jax.nn.relu(x)

    def tanh(self, x):
        return jnp.tanh(x)

    def sigmoid(self, x):
        return jax.nn.sigmoid(x)

    def exp(self, x):
        return jnp.exp(x)

    def log(self, x):
        return jnp.log(x)

    def sqrt(self, x):
        return jnp.sqrt(x)

    def square(self, x):
        return jnp.square(x)

    def erf(self, x):
        return jax.scipy.special.erf(x)

    def sin(self, x):
        return jnp.sin(x)

    def cos(self, x):
        return jnp.cos(x)

    def softmax(self, x, axis=-1):
        return jax.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return jax.nn.log_softmax(x, axis=axis)

    def sum(self, x, axis=None, keepdims=False):
        return jnp.sum(x, axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return jnp.mean(x, axis=axis, keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return jnp.max(x, axis=axis, keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return jnp.min(x, axis=axis, keepdims=keepdims)

    def argmax(self, x, axis=None, keepdims=False):
        return jnp.argmax(x, axis=axis, keepdims=keepdims).astype("int32")

    def cumsum(self, x, axis=None):
        return jnp.cumsum(x, axis=axis)

    def matmul(self, x1, x2):
        check_matmul(x1.shape, x2.shape)
        return jnp.matmul(x1, x2)

    def reshape(self, x, shape):
        return jnp.reshape(x, shape)

    def transpose(self, x, axes=None):
        return jnp.transpose(x, axes)

    def expand_dims(self, x, axis):
        return jnp.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        return jnp.squeeze(x, axis)

    def broadcast_to(self, x, shape):
        return jnp.broadcast_to(x, shape)

    def cast(self, x, dtype):
        return x.astype(dtype)

    def concatenate(self, xs, axis=0):
        return jnp.concatenate(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return jnp.stack(list(xs), axis=axis)

    def pad(self, x, pad_width, mode="constant", constant_values=None):
        return jnp.pad(x, pad_width, mode=mode, **({} if constant_values is None else {"constant_values":
                                                                                          constant_values}))

    def _scan(self, step, init, xs, length, reverse, unroll):
        carry, ys = lax.scan(lambda c, x: tuple(map(tuple, step(list(c), list(x)))), tuple(init), tuple(xs),
                             length=length, reverse=reverse, unroll=unroll)
        return list(carry), list(ys)

    def _take(self, x, indices, axis):
        return jnp.take(x, indices, axis=axis)

    def _take_along_axis(self, x, indices, axis):
        return jnp.take_along_axis(x, indices, axis=axis)

    def ones_like(self, x):
        return jnp.ones_like(x)

    def zeros_like(self, x):
        return jnp.zeros_like(x)

    def one_hot(self, x, num_classes, axis=-1, dtype=None, sparse=False):
        return jax.nn.one_hot(x, num_classes, axis=axis, dtype=dtype or self.dtype)

    def conv(self, inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
        strides, dilations, padding = checked_conv(inputs, kernel, strides, padding, data_format, dilation_rate)
        return lax.conv_general_dilated(inputs, kernel, strides, padding.upper(), rhs_dilation=dilations,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def max_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        return lax.reduce_window(inputs, -jnp.inf, lax.max, (1, *size, 1), (1, *strides, 1), padding.upper())

    def average_pool(self, inputs, pool_size, strides=None, padding="valid"):
        # Keras' average over the window's elements inside the input (padding excluded).
        size, strides, padding = window(pool_size, strides, padding)
        dims, steps = (1, *size, 1), (1, *strides, 1)
        total = lax.reduce_window(inputs, 0.0, lax.add, dims, steps, padding.upper())
        count = lax.reduce_window(jnp.ones(inputs.shape[1:3], inputs.dtype)[None, :, :, None], 0.0, lax.add, dims,
                                  steps, padding.upper())
        return total / count

    def all_finite(self, xs):
        return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in xs]))

    def _hash_uniform(self, keys, counters):
        x = jnp.bitwise_xor(keys, counters)
        for shift, multiplier in MIX32_STEPS:
            x = jnp.bitwise_xor(x, jnp.right_shift(x, jnp.uint32(shift)))
            if multiplier is not None:
                x = x * jnp.uint32(multiplier)  # uint32 products wrap modulo 2**32
        top = jnp.right_shift(x, jnp.uint32(32 - UNIFORM_BITS))
        return top.astype(self.dtype) * jnp.asarray(2.0 ** -UNIFORM_BITS, self.dtype)



def _outside_the_baseline(name: str):
    def missing(self, *args, **kwargs):
        raise NotImplementedError(f"ops.{name}: the bench's plain-JAX baseline writes only the ops the bench's models "
                                  "use")

    return missing


def checked_conv(inputs, kernel, strides, padding, data_format, dilation_rate):
    """:meth:`JaxOps.conv`'s arguments checked (channels last only): the strides and dilation pairs and the
    padding.

    Raises:
        NotImplementedError: channels first.
    """
    if data_format not in (None, "channels_last"):
        raise NotImplementedError(f"the bench's plain-JAX baseline convolves channels last, got {data_format!r}")
    return check_conv(inputs.ndim, kernel.ndim, strides, dilation_rate, padding)


def on_arrays(method):
    """A public op of :class:`JaxOps` that the toolkit writes as a composite (its arguments Tensors): the baseline's
    own ``jax.numpy`` call, on the arrays inside."""
    @functools.wraps(method)
    def op(self, *args, **kwargs):
        return self.wrap_tree(method(self, *Ops.unwrap(args), **Ops.unwrap(kwargs)))

    return op


_PLUMBING = {"is_native", "constant", "native_dtype", "native_shape", "native_cast"}
for _name, _method in list(vars(JaxOps).items()):
    if callable(_method) and not _name.startswith("_") and _name not in ARGUMENTS and _name not in _PLUMBING:
        setattr(JaxOps, _name, on_arrays(_method))
# The rest of the vocabulary is not part of the baseline: JaxOps is instantiable, and says so if a model reaches it.
for _name in sorted(JaxOps.__abstractmethods__):
    setattr(JaxOps, _name, _outside_the_baseline(_name))
JaxOps.__abstractmethods__ = frozenset()
