"""Conv2D(32, 3, relu) -> GlobalMaxPooling2D -> Dense(10) from logits, data parallel, on scikit-learn's digits as
8x8x1 images.

    python examples/conv_classifier.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli
from mlp_classifier import evaluate, train

import toolkit
from toolkit import layers
from toolkit.datasets import digits
from toolkit.nn.models import sparse_softmax_cross_entropy


def conv_net(filters: int) -> toolkit.Model:
    def init(rng):
        return {**layers.conv2d_init(rng, 1, filters, 3), **layers.dense_init(rng, filters, 10)}

    def forward(ops, params, x):
        features = layers.conv2d(ops, params, ops.reshape(x, (-1, 8, 8, 1)), activation="relu")
        return layers.dense(ops, params, layers.global_max_pool2d(ops, features))

    return toolkit.Model(init, forward, sparse_softmax_cross_entropy(10), name=f"conv{filters}-gmp-dense10")


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--filters", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.03, help="Adam learning rate")
    args = parser.parse_args(argv)
    _cli.prepare(args)
    x_train, y_train, x_test, y_test = digits(seed=args.seed)
    trainer = toolkit.DataParallel(conv_net(args.filters), args.backend, args.devices, toolkit.optim.Adam(args.lr),
                                   seed=args.seed)
    train(trainer, x_train, y_train, args.epochs, args.batch)
    result = {"test_accuracy": evaluate(trainer, x_test, y_test), "steps": trainer.step_count,
              "devices": [str(d) for d in trainer.devices]}
    return _cli.report(args, result, [
        f"{args.backend} on {', '.join(result['devices'])}: {trainer.model.name}, {trainer.step_count} steps",
        f"test accuracy {result['test_accuracy']:.3f}"])


if __name__ == "__main__":
    main()
