"""The Keras model of the MirroredStrategy recipe, Sequential Dense(128, relu) -> Dense(10, softmax) with sparse
categorical cross-entropy, imported as it is (toolkit.from_keras), trained with fit, data parallel, on
scikit-learn's digits; the trained weights then go back into the Keras model (toolkit.to_keras), whose own
predictions match. --backend aesara works too where Keras (with TensorFlow) is installed beside Aesara.

    python examples/keras_seed_mlp.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli

from toolkit.datasets import digits


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    args = parser.parse_args(argv)
    _cli.prepare(args)  # the logical devices first: importing Keras starts TensorFlow
    import keras

    keras.utils.set_random_seed(args.seed)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")], name="keras-seed-mlp")
    model.compile(loss="sparse_categorical_crossentropy")
    return _cli.fit_keras_model(args, model, digits(seed=args.seed))


if __name__ == "__main__":
    main()
