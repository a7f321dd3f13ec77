"""Keras' "simple MNIST convnet" (Conv2D(32) -> MaxPooling2D -> Conv2D(64) -> MaxPooling2D -> Flatten ->
Dropout(0.5) -> Dense(10, softmax)), built with Keras as it is and imported (toolkit.from_keras), trained with fit,
data parallel, on scikit-learn's 8x8 digits (so the convolutions pad "same"). Dropout draws the toolkit's masks:
the same on every backend and device count. The trained weights then go back into the Keras model
(toolkit.to_keras), whose own predictions match. --backend aesara works too where Keras (with TensorFlow) is
installed beside Aesara.

    python examples/keras_convnet.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli

from toolkit.datasets import digits


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--filters", type=int, default=32, help="the first convolution's (the second has twice)")
    parser.add_argument("--lr", type=float, default=0.005, help="Adam learning rate")
    args = parser.parse_args(argv)
    _cli.prepare(args)  # the logical devices first: importing Keras starts TensorFlow
    import keras

    keras.utils.set_random_seed(args.seed)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(args.filters, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(2 * args.filters, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10, activation="softmax"),
    ], name="keras-convnet")
    model.compile(loss="sparse_categorical_crossentropy")
    images = [a.reshape(-1, 8, 8, 1) if a.ndim == 2 else a for a in digits(seed=args.seed)]
    return _cli.fit_keras_model(args, model, images)


if __name__ == "__main__":
    main()
