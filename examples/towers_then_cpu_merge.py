"""Model parts on two devices, merged on the CPU (the ``tf.device`` towers recipe used to compare Theano and
TensorFlow): the left and right halves of each digit go through their own dense tower, each tower on its own
device; the two are concatenated and classified on the CPU; trained end to end with ModelParallel.

    python examples/towers_then_cpu_merge.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli

import toolkit
from toolkit import Part, PartedModel, layers
from toolkit.datasets import digits
from toolkit.nn.models import accuracy, sparse_softmax_cross_entropy


def towers_model(hidden: int, devices, merge_device) -> PartedModel:
    def init(rng):
        return {**layers.dense_init(rng, 32, hidden, prefix="left"),
                **layers.dense_init(rng, 32, hidden, prefix="right"),
                **layers.dense_init(rng, 2 * hidden, 10, prefix="merge")}

    def tower(prefix):
        return lambda ops, params, x: layers.dense(ops, params, x, prefix=prefix, activation="relu")

    def merge(ops, params, left, right):
        return layers.dense(ops, params, ops.concat([left, right], axis=1), prefix="merge")

    parts = [
        Part("left_tower", tower("left"), ("left",), ("left/kernel", "left/bias"), devices[0]),
        Part("right_tower", tower("right"), ("right",), ("right/kernel", "right/bias"), devices[-1]),
        Part("merge", merge, ("left_tower", "right_tower"), ("merge/kernel", "merge/bias"), merge_device),
    ]
    return PartedModel.build(init, parts, sparse_softmax_cross_entropy(10), inputs=("left", "right"),
                             name=f"towers{hidden}-merge")


def halves(x):
    images = x.reshape(-1, 8, 8)
    return {"left": images[:, :, :4].reshape(len(x), 32), "right": images[:, :, 4:].reshape(len(x), 32)}


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args(argv)
    backend = _cli.prepare(args)
    devices = backend.select_devices(args.devices)
    model = towers_model(args.hidden, devices, "cpu:0")
    trainer = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.01), seed=args.seed)
    x_train, y_train, x_test, y_test = digits(seed=args.seed)
    for _ in range(args.epochs):
        order = trainer.rng.permutation(len(y_train))
        for start in range(0, len(order) - args.batch + 1, args.batch):
            index = order[start:start + args.batch]
            trainer.step(halves(x_train[index]), y_train[index])
    params = trainer.params()
    logits = backend.make_parallel(lambda ops, left, right: model.forward(ops, params, {"left": left, "right": right}),
                                   devices[:1], **halves(x_test))
    result = {"test_accuracy": accuracy(backend.to_numpy(logits), y_test), "steps": trainer.step_count,
              "part_devices": {k: str(v) for k, v in trainer.devices.items()}}
    placed = ", ".join(f"{part} on {device}" for part, device in result["part_devices"].items())
    return _cli.report(args, result, [f"{args.backend}: {model.name}: {placed}",
                                      f"{trainer.step_count} steps, test accuracy {result['test_accuracy']:.3f}"])


if __name__ == "__main__":
    main()
