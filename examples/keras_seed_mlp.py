"""The Keras model of the MirroredStrategy recipe, Sequential Dense(128, relu) -> Dense(10, softmax) with sparse
categorical cross-entropy, imported as it is (toolkit.from_keras), trained with fit, data parallel, on
scikit-learn's digits; the trained weights then go back into the Keras model (toolkit.to_keras), whose own
predictions match. --backend aesara works too where Keras (with TensorFlow) is installed beside Aesara.

    python examples/keras_seed_mlp.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli
import numpy as np

import toolkit
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
    x_train, y_train, x_test, y_test = digits(seed=args.seed)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), args.backend, args.devices,
                                   toolkit.optim.Adam(args.lr), seed=args.seed)
    history = trainer.fit(x_train, y_train, epochs=args.epochs, batch_size=args.batch,
                          validation_data=(x_test, y_test), metrics=["accuracy"], verbose=2)
    toolkit.to_keras(trainer.params(), model)
    keras_outputs = np.asarray(model(x_test.astype(np.float32), training=False))
    difference = float(np.max(np.abs(keras_outputs - trainer.predict(x_test))))
    keras_accuracy = float(np.mean(np.argmax(keras_outputs, axis=-1) == y_test))
    result = {"backend": args.backend, "devices": args.devices, "loss": history.history["loss"],
              "test_accuracy": history.history["val_accuracy"][-1], "keras_test_accuracy": keras_accuracy,
              "keras_max_abs_diff": difference}
    return _cli.report(args, result, [
        f"{model.name} imported from Keras, trained on {args.backend} over {args.devices} device(s)",
        f"test accuracy: toolkit {result['test_accuracy']:.3f}, the Keras model with the trained weights "
        f"{keras_accuracy:.3f} (outputs differ by at most {difference:.1e})"])


if __name__ == "__main__":
    main()
