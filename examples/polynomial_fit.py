"""Fit y = 5x^2 + 3 from random samples with make_parallel-style data parallelism and Adam(0.1); prints the
recovered coefficients of a x^2 + b x + c (about [5, 0, 3]).

    python examples/polynomial_fit.py --backend tensorflow --devices 2
"""

from __future__ import annotations

import _cli
import numpy as np

import toolkit


def init(rng):
    return {"coefficients": rng.normal(size=3)}


def forward(ops, params, x):
    a, b, c = params["coefficients"][0], params["coefficients"][1], params["coefficients"][2]
    return a * ops.square(x) + b * x + c


def loss(ops, prediction, y):
    return ops.square(prediction - y)


MODEL = toolkit.Model(init, forward, loss, name="polynomial")


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args(argv)
    _cli.prepare(args)
    rng = np.random.default_rng(args.seed)
    x = rng.uniform(-2, 2, size=args.samples)
    y = 5 * x**2 + 3 + rng.normal(scale=0.1, size=args.samples)
    trainer = toolkit.DataParallel(MODEL, args.backend, args.devices, toolkit.optim.Adam(0.1), dtype="float64",
                                   seed=args.seed)
    for _ in range(args.steps):
        final_loss = trainer.step(x, y)
    coefficients = trainer.params()["coefficients"]
    result = {"coefficients": coefficients.tolist(), "loss": final_loss, "devices": [str(d) for d in trainer.devices]}
    return _cli.report(args, result, [
        f"{args.backend} on {', '.join(result['devices'])}: {args.steps} Adam(0.1) steps on {args.samples} samples",
        f"recovered [a, b, c] = {np.round(coefficients, 3).tolist()} (true [5, 0, 3]), mean squared error "
        f"{final_loss:.4f}",
    ])


if __name__ == "__main__":
    main()
