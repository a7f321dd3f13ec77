"""The ``multigpu`` command's workloads: a model with its data (``from toolkit.workloads import Workload``).

``multigpu compare``, ``parity`` and ``bench`` take ``--model`` as a name of :data:`WORKLOADS` or as
``module:function``, a function returning a :class:`toolkit.Model` or a :class:`Workload`; :func:`load_workload`
resolves either. The public names of :mod:`toolkit.command.workloads`, where they are written and documented.
"""

from toolkit.command.workloads import WORKLOADS, Workload, load_workload

__all__ = ["WORKLOADS", "Workload", "load_workload"]
