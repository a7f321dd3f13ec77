"""Training across processes: this process's place in the job, the start of the framework's runtime across
processes, and this process's rows of each global batch (``from toolkit.distributed import initialize``).

The public names of :mod:`toolkit.processes.distributed`, where the environment variables read and the bounded
waiting are documented; its other functions are the backends' runtime helpers, not part of this interface.
"""

from toolkit.processes.distributed import (
    DEFAULT_PORT,
    DEFAULT_TIMEOUT,
    Cluster,
    DistributedError,
    PeerLostError,
    current,
    initialize,
    process_slice,
    resolve,
)

__all__ = ["DEFAULT_PORT", "DEFAULT_TIMEOUT", "Cluster", "DistributedError", "PeerLostError", "current", "initialize",
           "process_slice", "resolve"]
