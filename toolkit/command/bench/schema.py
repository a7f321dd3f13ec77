"""The results file of ``multigpu bench``: its schema's name and version, and the candidates' labels.

``bench.json``, schema :data:`SCHEMA` version :data:`SCHEMA_VERSION`: ``config`` (``models``, ``batch`` and ``steps``:
overrides or null), ``machine``, ``peak`` (``size``, ``dtype``, ``gflops``: library -> GFLOP/s), ``runs`` (``model``,
``batch``, ``steps``, ``devices``: the process's device count, ``devices_used``: how many the candidate trains on,
``backend``, ``candidate``, ``label``, ``median_ms``, ``min_ms``, ``max_ms`` over rounds, ``round_ms``: each round's
mean step time, ``compile_s``: the first step, ``warmup_s``: the warm-up cycle, ``first_peak_mb``, ``step_peak_mb``,
``host_ms``: for the toolkit's candidates, the median over rounds of a step's time outside the backend's compiled step
(its batch checks, keys and split), else null, ``param_diff``: max |value - toolkit's| / max |toolkit value| over
parameters and state, null for the toolkit itself, ``gflop_per_step``, ``gflops``: achieved, ``peak_fraction``: of the
best peak, ``compute_bound``, ``library``: what computed its matmuls and convolutions (XLA, TensorFlow's kernels
with or without oneDNN, the C linker's BLAS), ``products_alone_ms``: the step's matmuls and convolutions alone with this
backend's library, on compute-bound models at one device, else null, ``products_alone_gflops``), ``ratios`` (``model``,
``backend``, ``devices``, ``candidate``, ``baseline``, ``baseline_devices``, ``ratio``, ``low`` and ``high``: the
bootstrap interval, ``target``: the bound or null, ``verdict``: "met", "not met", "within noise", or null without a
target), ``cross_backend`` (``model``, ``devices``, ``backend``, ``candidate``: each toolkit candidate, ``median_ms``,
``fastest``: the backend whose toolkit step was fastest at that model and device count, ``ratio``: the step over
that one's, ``low``, ``high``, ``target``, ``verdict``, ``peak_fraction``, ``products_alone_gflops``) and
``fractions`` (``model``, ``backend``, ``candidate``, ``fraction``, ``low``, ``high``, ``target``,
``verdict``, ``products_alone_fraction``: the products' share of the best peak, ``of_products_alone``: the step's
GFLOP/s over theirs) and ``inputs`` (``model``, ``backend``, ``devices``, ``candidate``: the input candidate
(``fit-generator``, ``fit-tfdata``), ``baseline``: ``fit-arrays``, ``throughput``: the baseline's median step time over
the candidate's (its throughput as a share of fit from arrays), ``low``, ``high``: the bootstrap interval, ``target``,
``verdict``: "met" when the whole interval is at or above the target).
"""

#: The results file's ``schema`` entry, and its version (raised when a field changes meaning or goes).
SCHEMA = "multigpu-toolkit/bench"
SCHEMA_VERSION = 8

#: Each candidate in words, in tables and in the results' ``label``.
LABELS = {
    "toolkit": "toolkit DataParallel",
    "toolkit-c": "toolkit DataParallel, C linker",
    "mirrored-ctl": "MirroredStrategy custom loop",
    "keras-fit": "Keras fit, MirroredStrategy",
    "function": "tf.function step",
    "function-xla": "tf.function step, jit_compile",
    "function-checked": "tf.function step, all-or-nothing",
    "function-jax": "function + updates, JAX linker",
    "function-c": "function + updates, C linker",
    "function-jax-checked": "function + updates, all-or-nothing, JAX linker",
    "function-c-checked": "function + updates, all-or-nothing, C linker",
    "jax-jit": "plain JAX, jax.jit",
    "fit-arrays": "toolkit fit, from arrays",
    "fit-generator": "toolkit fit, from a generator",
    "fit-tfdata": "toolkit fit, from tf.data",
}

#: The input candidates: the toolkit's ``fit`` (one epoch a round) fed the same batches from arrays, from a Python
#: generator and from a batched ``tf.data`` dataset; the last two are compared with the first (``inputs``), not with
#: the natives.
INPUT_CANDIDATES = ("fit-arrays", "fit-generator", "fit-tfdata")
