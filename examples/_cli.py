"""The command line every example shares: ``--backend``, ``--devices``, ``--seed``, ``--json``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import toolkit
from toolkit.backend.logical_devices import logical_device_count


def parser(doc: str) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    result.add_argument("--backend", choices=["tensorflow", "aesara", "pytensor"], default="tensorflow")
    result.add_argument("--devices", type=int, default=2, help="devices to use: GPUs, or logical CPU devices")
    result.add_argument("--seed", type=int, default=0)
    result.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    return result


def prepare(args: argparse.Namespace, logical: int | None = None):
    """Make the logical CPU devices (unless this process already has them) and load the backend."""
    if args.devices < 1:
        raise SystemExit(f"--devices must be >= 1, got {args.devices}")
    if logical_device_count() is None:
        toolkit.use_logical_devices(logical or args.devices)
    return toolkit.get_backend(args.backend)


def report(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    for line in lines:
        print(line)
    if args.json:
        print(json.dumps(result))
    return result


def fit_keras_model(args: argparse.Namespace, model, data) -> dict[str, Any]:
    """The Keras examples' common part: import the built Keras ``model``, train it with ``fit`` (Adam, validation
    accuracy each epoch), write the trained weights back and compare the Keras model's own predictions."""
    import numpy as np

    x_train, y_train, x_test, y_test = data
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
    return report(args, result, [
        f"{model.name} imported from Keras, trained on {args.backend} over {args.devices} device(s)",
        f"test accuracy: toolkit {result['test_accuracy']:.3f}, the Keras model with the trained weights "
        f"{keras_accuracy:.3f} (outputs differ by at most {difference:.1e})"])
