"""The Theano family's mesh of JAX devices: a one-axis ``shard_map`` over a step's devices (every process's), the
arrays it takes and gives, and the sums across it (the cross-replica sum as an engine op, ``lax.psum`` of a pytree).
Both the mesh step (:mod:`.step`) and the all-reduce between processes (:mod:`.distributed`) run on it."""

from __future__ import annotations

import numpy as np
import optree

from .environment import import_framework, imported

theano, jax = import_framework()

import jax.numpy as jnp  # noqa: E402

from .kernels import conv_lowering  # noqa: E402  (imports JAX: after the framework is set up)

tt = theano.tensor
Apply = imported("graph.basic", "Apply")
Op = imported("graph.op", "Op")
jax_funcify = imported("link.jax.dispatch", "jax_funcify")


class ReplicaSum(Op):
    """The sum of a value over the devices of a mapped step (``lax.psum`` over ``axis``), as an engine op: what
    ``ops.cross_replica_sum`` builds in a multi-device step. Its gradient is the same sum of the gradients: each
    replica differentiates its own share of the loss, and every replica's share depends on every replica's input."""

    __props__ = ("axis",)

    def __init__(self, axis: str) -> None:
        self.axis = axis

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        raise NotImplementedError("a cross-replica sum runs only inside the JAX linker's mapped step")

    def do_constant_folding(self, fgraph, node):
        return False  # a constant input (a shard's count) still differs in sum from itself

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def grad(self, inputs, output_grads):
        return [self(output_grads[0])]

    def pullback(self, inputs, outputs, output_grads):  # PyTensor 3's gradient method; Aesara calls grad
        return self.grad(inputs, output_grads)


@jax_funcify.register(ReplicaSum)
def _jax_replica_sum(op, **kwargs):
    return lambda x: jax.lax.psum(x, op.axis)


def psum_flat(tree, axis):
    """``lax.psum`` of a pytree as one flat vector: on CPU each operand of a psum is an all-reduce of its own, each
    with its fixed cost, so one all-reduce of their concatenation is cheaper than one per leaf."""
    leaves, spec = optree.tree_flatten(tree)
    total = jax.lax.psum(jnp.concatenate([jnp.ravel(leaf) for leaf in leaves]), axis)
    ends = np.cumsum([leaf.size for leaf in leaves])
    return optree.tree_unflatten(spec, [total[end - leaf.size:end].reshape(leaf.shape)
                                        for leaf, end in zip(leaves, ends)])


class Mesh:
    """A one-axis mesh over the step's devices and the arrays a mapped step takes and gives.

    ``devices`` are every device of the step (every process's, in order); ``local`` this process's, in replica order.
    Arrays are either split along their first axis, one row per device, or whole on every device (replicated).
    """

    def __init__(self, devices, local, axis: str) -> None:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.local_devices, self._axis = list(local), axis
        self._mesh = Mesh(np.asarray(devices, dtype=object), (axis,))
        self.specs = (PartitionSpec(), PartitionSpec(axis))  # whole, split
        self._whole, self._split = (NamedSharding(self._mesh, spec) for spec in self.specs)
        self._count = len(devices)
        self._one_process = len(self.local_devices) == self._count

    def map(self, fn, in_specs, out_specs):
        """``fn`` run on every device with its shards, named axis ``axis`` (``shard_map``; JAX checks nothing of
        replication: the psums make the outputs equal, and ``fn`` does not use JAX's variance typing). It is traced
        knowing how many of the process's CPU devices run it together (:func:`.conv_lowering.sharing_cores`)."""
        sharing = sum(device.platform == "cpu" for device in self.local_devices)

        def replica(*args):
            with conv_lowering.sharing_cores(sharing):
                return fn(*args)

        if hasattr(jax, "shard_map"):  # jax >= 0.7
            return jax.shard_map(replica, mesh=self._mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
        from jax.experimental.shard_map import shard_map  # jax 0.4.30

        return shard_map(replica, self._mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)

    def split(self, stacked: np.ndarray):
        """This process's rows (one per local device) as the step's array split over every device."""
        if self._one_process:
            return jax.device_put(stacked, self._split)
        rows = [jax.device_put(stacked[i:i + 1], device) for i, device in enumerate(self.local_devices)]
        return jax.make_array_from_single_device_arrays((self._count, *stacked.shape[1:]), self._split, rows)

    def whole(self, value):
        """A host value, whole on every device."""
        if self._one_process:
            return jax.device_put(value, self._whole)
        return self.replicated([value] * len(self.local_devices))

    def replicated(self, values: list):
        """One array whole on every device, made of ``values[i]`` on local device ``i`` (no copy where it is there
        already): the replicas of a variable."""
        values = [jax.device_put(v, device) for v, device in zip(values, self.local_devices)]
        return jax.make_array_from_single_device_arrays(np.shape(values[0]), self._whole, values)

    def local(self, array) -> list:
        """An output's buffer on each local device, in replica order (its row where it is split)."""
        shards = {shard.device: shard.data for shard in array.addressable_shards}
        return [shards[device] for device in self.local_devices]
