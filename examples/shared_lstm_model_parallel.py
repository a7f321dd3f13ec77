"""Model parallelism with a shared layer: one LSTM encodes sequence A on one device and sequence B on another, the
two encodings are concatenated on the CPU and classified, trained end to end with ModelParallel.

The task (synthetic): is the first feature of sequence A, on average, larger than that of sequence B?

    python examples/shared_lstm_model_parallel.py --backend aesara --devices 2
"""

from __future__ import annotations

import _cli
import numpy as np

import toolkit
from toolkit import Part, PartedModel, layers
from toolkit.nn.models import accuracy, sparse_softmax_cross_entropy

STEPS, FEATURES = 8, 4
LSTM = ("lstm/kernel", "lstm/recurrent", "lstm/bias")


def shared_lstm_model(units: int, devices, merge_device) -> PartedModel:
    def init(rng):
        return {**layers.lstm_init(rng, FEATURES, units), **layers.dense_init(rng, 2 * units, 2, prefix="head")}

    def encode(ops, params, sequence):
        return layers.lstm(ops, params, sequence, steps=STEPS, units=units)

    def classify(ops, params, encoded_a, encoded_b):
        return layers.dense(ops, params, ops.concat([encoded_a, encoded_b], axis=1), prefix="head")

    parts = [
        Part("encode_a", encode, inputs=("a",), params=LSTM, device=devices[0]),
        Part("encode_b", encode, inputs=("b",), params=LSTM, device=devices[-1]),  # the same weights
        Part("classify", classify, inputs=("encode_a", "encode_b"), params=("head/kernel", "head/bias"),
             device=merge_device),
    ]
    return PartedModel.build(init, parts, sparse_softmax_cross_entropy(2), inputs=("a", "b"),
                             name=f"shared-lstm{units}")


def make_data(rng, n):
    a, b = rng.normal(size=(n, STEPS, FEATURES)), rng.normal(size=(n, STEPS, FEATURES))
    return {"a": a, "b": b}, (a[:, :, 0].mean(axis=1) > b[:, :, 0].mean(axis=1)).astype(np.int64)


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--train-steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    backend = _cli.prepare(args)
    devices = backend.select_devices(args.devices)
    model = shared_lstm_model(args.units, devices, "cpu:0")
    trainer = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.01), seed=args.seed)
    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_data(rng, 2048)
    x_test, y_test = make_data(rng, 256)
    for _ in range(args.train_steps):
        index = trainer.rng.choice(len(y_train), size=args.batch, replace=False)
        loss = trainer.step({k: v[index] for k, v in x_train.items()}, y_train[index])
    params = trainer.params()  # evaluate the same model on one device
    logits = backend.make_parallel(lambda ops, a, b: model.forward(ops, params, {"a": a, "b": b}), devices[:1],
                                   **x_test)
    result = {"test_accuracy": accuracy(backend.to_numpy(logits), y_test), "loss": loss,
              "part_devices": {k: str(v) for k, v in trainer.devices.items()},
              "param_devices": {k: str(v) for k, v in trainer.param_devices().items()}}
    placed = ", ".join(f"{part} on {device}" for part, device in result["part_devices"].items())
    return _cli.report(args, result, [
        f"{args.backend}: {model.name} with {placed}; "
        f"the LSTM weights live on {result['param_devices']['lstm/kernel']}",
        f"{args.train_steps} steps, last loss {loss:.3f}, test accuracy {result['test_accuracy']:.3f} (chance 0.5)"])


if __name__ == "__main__":
    main()
