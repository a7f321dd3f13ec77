"""Dense(128, relu) -> Dense(10, softmax) with sparse categorical cross-entropy and Adam, data parallel (the
MirroredStrategy recipe), on scikit-learn's digits, or on an MNIST ``mnist.npz`` you already have (add
``--data ~/.keras/datasets/mnist.npz``):

    python examples/mlp_classifier.py --backend aesara --devices 2
"""

from __future__ import annotations

import _cli
import numpy as np

import toolkit
from toolkit.datasets import digits
from toolkit.nn.models import accuracy, mlp


def load_mnist(path: str):
    """The arrays of Keras' ``mnist.npz`` (``x_train, y_train, x_test, y_test``), flattened to [0, 1] floats."""
    with np.load(path, allow_pickle=False) as data:
        missing = {"x_train", "y_train", "x_test", "y_test"} - set(data.files)
        if missing:
            raise SystemExit(f"{path} is not an MNIST npz: it lacks {sorted(missing)}")
        flat = lambda images: images.reshape(len(images), -1).astype(np.float64) / 255.0
        return flat(data["x_train"]), data["y_train"], flat(data["x_test"]), data["y_test"]


def train(trainer, x, y, epochs: int, batch: int) -> None:
    """Shuffled minibatches, the last partial one dropped (fixed shapes: no recompilation)."""
    for _ in range(epochs):
        order = trainer.rng.permutation(len(x))
        for start in range(0, len(order) - batch + 1, batch):
            index = order[start:start + batch]
            trainer.step(x[index], y[index])


def evaluate(trainer, x, y) -> float:
    params = trainer.params()
    logits = trainer.backend.make_parallel(lambda ops, x: trainer.model.forward(ops, params, x), trainer.devices, x=x)
    return accuracy(trainer.backend.to_numpy(logits), y)


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--data", help="path to an existing mnist.npz (default: scikit-learn's digits)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args(argv)
    _cli.prepare(args)
    x_train, y_train, x_test, y_test = load_mnist(args.data) if args.data else digits(seed=args.seed)
    model = mlp([x_train.shape[1], args.hidden, 10], activation="relu")
    trainer = toolkit.DataParallel(model, args.backend, args.devices, toolkit.optim.Adam(1e-3 if args.data else 1e-2),
                                   seed=args.seed)
    train(trainer, x_train, y_train, args.epochs, args.batch)
    result = {"test_accuracy": evaluate(trainer, x_test, y_test), "steps": trainer.step_count,
              "devices": [str(d) for d in trainer.devices], "data": args.data or "digits"}
    return _cli.report(args, result, [
        f"{args.backend} on {', '.join(result['devices'])}: {model.name}, {trainer.step_count} steps on "
        f"{result['data']}", f"test accuracy {result['test_accuracy']:.3f}"])


if __name__ == "__main__":
    main()
