"""Public functions refuse bad arguments with the typed errors of :mod:`toolkit.errors`, each message naming what was
given, and each error still the ``ValueError`` or ``TypeError`` that code written before the typed errors catches.

The fit arguments (verbose, shuffle, callbacks, validation data, metrics) are checked on a real trainer in
``tests/test_fit.py::test_refusals_change_nothing``; the cases here need no framework, except the backend methods'.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import toolkit
from toolkit import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from toolkit.command.parity import check_request, read_reference
from toolkit.command.seed_stats import t_quantile
from toolkit.command.seeds import parse_seeds, run_seeds
from toolkit.command.workloads import draw_batches, epoch_batches, load_workload
from toolkit.metrics import get as get_metrics
from toolkit.metrics import sparse_top_k_categorical_accuracy
from toolkit.ops.tensor import constant_dtype
from toolkit.optim import SGD, Adam, schedules
from toolkit.placement.splitting import shard_weights
from toolkit.tolerances import parity_bound, trajectory_bounds

MLP = toolkit.models.mlp([4, 2])


def _forward(ops, params, x):
    return x


#: Model code that only asks whether it trains and what shape ``x`` has: enough for dropout's checks.
TRACING = SimpleNamespace(training=True, shape=lambda x: (4, 3))

CASES = [
    # (call, error, the builtin it must still be, words of the message)
    (lambda: toolkit.split_sizes(-1, 2), ArgumentError, ValueError, "batch must be an int >= 0, got -1"),
    (lambda: toolkit.split_sizes(4, 0), ArgumentError, ValueError, r"n \(number of devices\) must be an int >= 1"),
    (lambda: toolkit.split_sizes(4, 2, [1.0]), ArgumentError, ValueError, r"one entry per device \(2\), got 1"),
    (lambda: toolkit.split_sizes(4, 2, [1.0, math.nan]), ArgumentError, ValueError, "finite numbers > 0, got"),
    (lambda: shard_weights([0, 0]), ArgumentError, ValueError, r"shards of sizes \[0, 0\]: the batch is empty"),
    (lambda: toolkit.layers.dropout(None, None, 1.0), ArgumentError, ValueError,
     r"dropout rate must be in \[0, 1\), got 1.0"),
    (lambda: toolkit.layers.dropout(TRACING, None, 0.5, noise_shape=(None, 2)), ShapeError, ValueError,
     r"noise_shape \(None, 2\) does not broadcast to x's shape \(4, 3\)"),
    (lambda: toolkit.models.mlp([4]), ArgumentError, ValueError, r"at least two sizes >= 1 .* got \[4\]"),
    (lambda: toolkit.models.mlp([4, 2], activation="swish"), ArgumentError, ValueError,
     "activation must be one of .* got 'swish'"),
    (lambda: toolkit.models.mnist_convnet((4, 4, 1)), ShapeError, ValueError,
     r"\(4, 4, 1\) images shrink to nothing with 'valid' padding"),
    (lambda: toolkit.models.transformer_lm(width=10, heads=3), ArgumentError, ValueError,
     "width 10 must be a multiple of heads 3"),
    (lambda: toolkit.Model(init=None, forward=_forward, loss=_forward), ArgumentTypeError, TypeError,
     "Model.init must be callable, got None"),
    (lambda: toolkit.Part("", _forward, ("x",)), ArgumentError, ValueError, "non-empty name, got ''"),
    (lambda: toolkit.Part("a", 3, ("x",)), ArgumentTypeError, TypeError, "fn must be callable, got 3"),
    (lambda: toolkit.Part("a", _forward, ()), ArgumentError, ValueError, "'a' needs at least one input"),
    (lambda: toolkit.PartedModel.build(MLP.init, [], MLP.loss), ArgumentError, ValueError,
     r"non-empty list of Part, got \(\)"),
    (lambda: toolkit.PartedModel.build(MLP.init, [toolkit.Part("a", _forward, ("y",))], MLP.loss), ArgumentError,
     ValueError, r"'a' reads \['y'\], which are neither data inputs nor earlier parts"),
    (lambda: toolkit.ModelParallel(MLP, "tensorflow", SGD(0.1)), ArgumentTypeError, TypeError,
     "needs a toolkit.PartedModel, got Model"),
    (lambda: toolkit.DataParallel("mlp", "tensorflow", 1, SGD(0.1)), ArgumentTypeError, TypeError,
     "model must be a toolkit.Model, got str"),
    (lambda: toolkit.DataParallel(MLP, "tensorflow", 1, "sgd"), ArgumentTypeError, TypeError,
     "optimizer must be a toolkit.optim optimizer, got str"),
    (lambda: toolkit.DataParallel(MLP, "tensorflow", 1, SGD(0.1), nan_policy="ignore"), ArgumentError, ValueError,
     "nan_policy must be one of .* got 'ignore'"),
    (lambda: SGD(-1.0), ArgumentError, ValueError, r"SGD lr must be a finite number in \(0.0, inf\), got -1.0"),
    (lambda: Adam(0.1, clipnorm=1.0, global_clipnorm=1.0), ArgumentError, ValueError,
     "Adam: give clipnorm or global_clipnorm, not both"),
    (lambda: schedules.ExponentialDecay(0.1, 0, 0.5), ArgumentError, ValueError,
     "decay_steps must be a finite number > 0.0, got 0"),
    (lambda: schedules.ExponentialDecay(0.1, 5, 2.0).peak(), ArgumentError, ValueError, "grows without bound"),
    (lambda: schedules.PiecewiseConstantDecay([3, 2], [1.0, 0.5, 0.1]), ArgumentError, ValueError,
     r"boundaries must increase, got \[3.0, 2.0\]"),
    (lambda: schedules.CosineDecay(0.1, 10, warmup_target=0.5), ArgumentError, ValueError,
     "warmup_target needs warmup_steps > 0, got 0.0"),
    (lambda: get_metrics("top9"), ArgumentError, ValueError, "unknown metric 'top9'"),
    (lambda: get_metrics([3]), ArgumentError, ValueError, "a name or a toolkit.metrics.Metric, got int"),
    (lambda: get_metrics(["accuracy", "accuracy"]), ArgumentError, ValueError, "must be unique and not 'loss'"),
    (lambda: sparse_top_k_categorical_accuracy(0), ArgumentError, ValueError, "k must be an int >= 1, got 0"),
    (lambda: trajectory_bounds("float32", None, 1.0), ArgumentError, ValueError,
     "float32 parity check needs each backend's own divergence"),
    (lambda: parity_bound("float32", Adam(0.1), 1000, 1.0, 1.0), ArgumentError, ValueError,
     r"no meaningful fixed float32 bound for Adam\(eps=1e-07\) over 1000 steps"),
    (lambda: load_workload("digits-mpl"), ArgumentError, ValueError, "unknown model 'digits-mpl'; expected one of"),
    (lambda: load_workload("no_such_module_h6:make"), ArgumentError, ValueError,
     "cannot load model 'no_such_module_h6:make': ModuleNotFoundError"),
    (lambda: load_workload("toolkit.errors:ToolkitError"), ArgumentError, ValueError,
     "returned ToolkitError; expected a toolkit.Model or toolkit.workloads.Workload"),
    (lambda: draw_batches(10, 11, 1, 0), ArgumentError, ValueError, "--batch 11 is larger than the 10 training"),
    (lambda: epoch_batches(10, 0, 1, 0), ArgumentError, ValueError, "batch size and epochs must be >= 1, got 0 and 1"),
    (lambda: parse_seeds("0,x"), ArgumentError, ValueError, "expected seeds like 0-9 or 0,3,7-9 .* got '0,x'"),
    (lambda: parse_seeds("3-1"), ArgumentError, ValueError, "the range '3-1' in '3-1' runs backwards"),
    (lambda: parse_seeds("1,0-2"), ArgumentError, ValueError, r"seeds \[1\] are given more than once"),
    (lambda: run_seeds([]), ArgumentError, ValueError, "expected at least one seed"),
    (lambda: t_quantile(0.3, 2), ArgumentError, ValueError, "expected 0.5 <= p < 1 and df >= 1, got p=0.3, df=2"),
    (lambda: check_request("float32", [1]), ArgumentError, ValueError, "needs each backend's own divergence"),
    (lambda: read_reference(Path("/nonexistent-h6/results.json")), ArgumentError, ValueError,
     "--against /nonexistent-h6/results.json: cannot read it"),
    (lambda: constant_dtype(np.array(["a"]), "float32"), DTypeError, TypeError,
     "a constant of dtype <U1 has no place in model code"),
]


@pytest.mark.parametrize("call, error, builtin, words", CASES,
                         ids=[re.sub(r"\W+", "-", words).strip("-")[:48] for *_, words in CASES])
def test_a_bad_argument_raises_a_typed_error(call, error, builtin, words):
    with pytest.raises(error, match=words) as raised:
        call()
    assert isinstance(raised.value, builtin)


def test_the_backend_methods_raise_typed_errors(backend):
    cases = [
        (lambda: backend.split(np.float32(1.0), 1), ShapeError, "cannot split a scalar"),
        (lambda: backend.average([]), ArgumentError, "at least one value, got none"),
        (lambda: backend.average([np.ones(2)], weights=[0.0]), ArgumentError, r"got \[0.0\]"),
        (lambda: backend.sum([], backend.list_devices()[0]), ArgumentError, "at least one value, got none"),
        (lambda: backend.make_parallel(_forward, 1), ArgumentError, "at least one keyword input to split, got none"),
        (lambda: backend.make_parallel(_forward, 1, x=np.ones(3), y=np.ones(2)), ShapeError,
         r"share a non-empty axis 0; got lengths \{'x': 3, 'y': 2\}"),
    ]
    if backend.name != "tensorflow":
        cases.append((lambda: toolkit.get_backend(backend.name, linker="numba"), ArgumentError,
                      "linker must be one of .* got 'numba'"))
    for call, error, words in cases:
        with pytest.raises(error, match=words):
            call()
