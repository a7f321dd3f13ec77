"""Theano's recipe ``shared(value, target="dev1")`` and ``x * 2`` computed there: a variable placed on a device named
in any spelling (``cuda1``, ``/gpu:1``, ``gpu:1``, ``/device:CPU:1``), computing x * 2 on it. On a machine with
GPUs, ``--device cuda1`` is Theano's ``target="dev1"`` on the second GPU; without, logical CPU devices stand in:

    python examples/shared_variable_on_device.py --backend aesara --device /device:CPU:1
    python examples/shared_variable_on_device.py --backend tensorflow --device /cpu:1
"""

from __future__ import annotations

import _cli
import numpy as np

import toolkit


def times_two(ops, x):
    return x * 2.0


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--device", help="any device spelling (default: the last device in use)")
    args = parser.parse_args(argv)
    backend = _cli.prepare(args)
    device = toolkit.parse_device(args.device) if args.device else backend.select_devices(args.devices)[-1]
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    try:
        shared = backend.variable(value, device, name="x")
    except toolkit.DeviceNotFoundError as error:
        raise SystemExit(f"{error}\n(on a machine without GPUs, try --device /cpu:1)") from None
    doubled = backend.call(times_two, shared.device, {"x": shared.value}, "float32")
    result = {"asked": args.device or str(device), "variable_device": str(shared.device),
              "result_device": str(backend.device_of(doubled)), "native_device": backend.native_name(shared.device),
              "correct": bool(np.array_equal(backend.to_numpy(doubled), value * 2))}
    return _cli.report(args, result, [
        f"{args.backend}: shared variable x {value.shape} asked on {result['asked']!r}, placed on "
        f"{result['variable_device']} ({result['native_device']})",
        f"x * 2 computed on {result['result_device']}: {'correct' if result['correct'] else 'WRONG'}"])


if __name__ == "__main__":
    main()
