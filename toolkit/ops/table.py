"""The op vocabulary as a reader sees it: every public op of :class:`~toolkit.ops.Ops` by group, and what each
refuses (the ``Raises:`` sections of the ops' docstrings). The ops table of docs/guides/compare.md is generated from
it (``python docs/update_readme.py``; ``tests/test_readme.py`` checks the page holds exactly this), so the table
lists what the code has. Reads the classes only: no framework is imported.
"""

from __future__ import annotations

import inspect
import re

from toolkit.ops import (
    arrays,
    bits,
    control,
    core,
    creation,
    elementwise,
    functional,
    interface,
    joins,
    linalg,
    losses,
    math,
    nn,
    products,
    reductions,
    shapes,
    signal,
    sorting,
    statistics,
    training,
    windows,
)

#: The groups in the order the table shows them: a title and the class that defines the group's ops.
GROUPS = (
    ("arithmetic, comparisons, basic activations", elementwise.ElementwiseOps),
    ("shapes, joins, indexing, gathering", shapes.ShapeOps),
    ("basic reductions, matmul", interface.Ops),
    ("elementwise math", math.MathOps),
    ("integers and bits", bits.BitOps),
    ("arrays: creation", creation.CreationOps),
    ("arrays: views, reordering, indices", arrays.ArrayOps),
    ("arrays: splits, stacks, repeats", joins.JoinOps),
    ("reductions, nan reductions, segments", reductions.ReductionOps),
    ("sorting, quantiles, searching", sorting.SortingOps),
    ("products", products.ProductOps),
    ("linear algebra", linalg.LinalgOps),
    ("activations, normalization, encodings", nn.NNOps),
    ("losses", losses.LossOps),
    ("convolution, pooling, attention", windows.WindowOps),
    ("signals: Fourier transforms, framing", signal.SignalOps),
    ("core: slices, scatter, casts", core.CoreOps),
    ("control flow: branches, loops, scans", control.ControlFlowOps),
    ("statistics: correlation, unique values", statistics.StatisticsOps),
    ("function transformations: vectorize, custom gradients", functional.FunctionalOps),
    ("training context: mode, state, noise, replicas", training.TrainingOps),
)
#: Public methods of Ops that are the boundary with the backends, not ops model code calls.
PLUMBING = frozenset({"call", "wrap", "wrap_tree", "unwrap", "is_native", "constant", "native_dtype", "native_shape",
                      "native_cast", "dtype_of"})


def op_names(cls: type) -> list[str]:
    """The public ops a group's class defines itself (not inherited), sorted."""
    return sorted(name for name, value in vars(cls).items()
                  if not name.startswith("_") and name not in PLUMBING and (callable(value) or
                                                                          isinstance(value, property)))


def refusals(cls: type, name: str) -> list[tuple[str, str]]:
    """``(error type, when)`` for each entry of the ``Raises:`` section of an op's docstring, its text on one line."""
    doc = inspect.getdoc(getattr(cls, name)) or ""
    match = re.search(r"^Raises:\n((?:[ \t]+.*\n?|\n)+)", doc, re.M)
    if not match:
        return []
    entries, current = [], None
    for line in match.group(1).splitlines():
        head = re.match(r"^ {4}([A-Za-z_, ]+(?:Error|Exception)[A-Za-z_, ]*):\s*(.*)$", line)
        if head:
            current = [head.group(1).strip(), head.group(2).strip()]
            entries.append(current)
        elif current is not None and line.strip():
            current[1] += " " + line.strip()
    return [(kind, text) for kind, text in entries]


def markdown() -> str:
    """The ops table of docs/guides/compare.md and the list of typed refusals, as Markdown."""
    lines = ["| group | ops |", "|---|---|"]
    refused = []
    for title, cls in GROUPS:
        names = op_names(cls)
        lines.append(f"| {title} ({len(names)}) | " + " ".join(f"`{name}`" for name in names) + " |")
        refused += [(name, kind, text) for name in names for kind, text in refusals(cls, name)]
    total = sum(len(op_names(cls)) for _, cls in GROUPS)
    lines += ["", f"{total} ops. Refused with a typed error, on every backend unless the text names one:", ""]
    lines += [f"- `{name}`: {kind}: {text}" for name, kind, text in refused]
    return "\n".join(lines)
