"""Add two random 1000x100 arrays split across devices and concatenate the result (the first recipe of the classic
"multi-GPU processing with data parallelism" tutorial).

    python examples/vector_add.py --backend aesara --devices 2
"""

from __future__ import annotations

import _cli
import numpy as np


def add(ops, a, b):
    return a + b


def main(argv=None):
    args = _cli.parser(__doc__).parse_args(argv)
    backend = _cli.prepare(args)
    rng = np.random.default_rng(args.seed)
    a, b = rng.random((1000, 100)), rng.random((1000, 100))
    devices = backend.select_devices(args.devices)
    out = backend.make_parallel(add, devices, a=a, b=b)
    error = float(np.max(np.abs(backend.to_numpy(out) - (a + b))))
    result = {"shape": list(backend.to_numpy(out).shape), "max_abs_error": error,
              "devices": [str(d) for d in devices], "result_device": str(backend.device_of(out))}
    return _cli.report(args, result, [
        f"{args.backend}: a + b for 1000x100 arrays split over {', '.join(result['devices'])}",
        f"result {tuple(result['shape'])} on {result['result_device']}, max |error| vs NumPy = {error:.1e}",
    ])


if __name__ == "__main__":
    main()
