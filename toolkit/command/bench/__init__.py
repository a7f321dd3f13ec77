"""``multigpu bench``: this toolkit against native code on the same models, parameters, batches and devices.

Models: by default the dispatch-bound digits MLP and the compute-bound ResNet and Transformer at the sizes of
:data:`toolkit.command.workloads.BENCH_MODELS` (each with its own batch and steps per round). For each model and
device count ``n``, a fresh process with ``n`` logical devices (MirroredStrategy cannot be rebuilt with another
device count in one process, and JAX's device count is fixed at start) runs these candidates:

- ``toolkit``: :class:`~toolkit.DataParallel` on ``n`` devices, per backend, plus any other backend options a
  backend's natives declare in ``TOOLKIT_OPTIONS`` (the Theano family's C linker, which has one device, at
  ``n = 1``);
- the natives (:mod:`toolkit.command.bench.natives`): TensorFlow's MirroredStrategy custom training loop and Keras
  ``fit`` under MirroredStrategy on the same ``n`` devices, and at ``n = 1`` a plain ``tf.function`` step without
  and with ``jit_compile=True``; a plain ``aesara.function`` step with ``updates`` (JAX and C linkers) and the
  model in plain JAX under ``jax.jit``, on one device and in the one-device process only. Natives carry the model
  state (batch normalization's moving statistics) as the framework's own variables; a model that draws noise
  (dropout) is refused, since they do not draw the toolkit's per-example keys.

All start from the same parameters and state and train with SGD on the same cycle of ``steps`` batches. The first
step is timed alone (``compile_s``: tracing and compilation), then the rest of a warm-up cycle; then the candidates
take turns, one cycle each per round, for ``rounds`` rounds, the order rotating every round; a candidate's step time
is the median over rounds of its mean step time in a round. Then every native's parameters and state are compared
with the toolkit's of the same backend: having done the same steps, they must agree to rounding, which shows the
comparison is like for like.

Memory (Linux): the process's peak resident memory is reset before each candidate's warm-up cycle and before each of
its rounds (``/proc/self/clear_refs``); ``first_peak_mb`` is the peak during the warm-up cycle above the resident
memory just before it (compilation and first buffers), ``step_peak_mb`` the largest such excess over its rounds
(the step's working memory: activations, gradients, temporaries). Null where the kernel does not offer it.

A ratio is reported with its spread: a bootstrap interval over the rounds
(:func:`~toolkit.command.bench.statistics.ratio_interval`), and a verdict against its target: "met" when the whole
interval is at or below the target, "not met" when the whole interval is above it, and "within noise" when the interval
straddles it (the machine's noise decides, not the code).

How well the machine is used: before the models, a process of its own measures the machine's peak, the best FLOP/s of a
large square matmul in the bench's dtype through NumPy's BLAS and each backend's library (TensorFlow; JAX for Aesara and
PyTensor); each worker counts the model's FLOPs per step from the shapes of its matmuls and convolutions
(:mod:`toolkit.command.flops`, which says how), and each candidate's achieved FLOP/s is that count over its median step
time, also given as a fraction of the best peak; on compute-bound models the faster backend's toolkit step at one device
is held to :data:`~toolkit.command.bench.targets.PEAK_FRACTION_TARGET` of it (``fractions``). What stands between a step
and the peak is split in two by timing, in the one-device process of a compute-bound model, the step's matmuls and
convolutions alone with each backend's library (:func:`toolkit.command.flops.products_alone`): their own share of the
peak (what their shapes allow) and the step's speed over theirs (what the rest of the step costs).

TensorFlow runs with oneDNN's kernels on (its default on x86; the toolkit itself turns them off for quiet logs
unless ``TF_ENABLE_ONEDNN_OPTS`` is set): the bench measures each framework at its best.

Its files, one job each: ``run.py`` starts the worker processes (one per model and device count, and one for the
peak; ``__main__.py`` is a worker) and gathers their results; ``measure.py`` is what a worker measures (the
candidates' cycles and rounds, memory, the parameters compared); ``natives/`` holds each framework's native training
code; ``targets.py`` the targets; ``statistics.py`` the ratios and fractions of peak with their bootstrap intervals
and verdicts; ``report.py`` the tables printed and the benchmarks page's markdown; ``schema.py`` the results
file's schema.
"""

from toolkit.command.bench.report import markdown, print_report
from toolkit.command.bench.run import run_bench

__all__ = ["markdown", "print_report", "run_bench"]
