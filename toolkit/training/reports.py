"""What ``fit`` prints while it runs (``verbose``): nothing, a progress bar per epoch, or a line per epoch."""

from __future__ import annotations

import time

#: ``verbose`` values: 0 silent, 1 a progress bar (rich) per epoch, 2 one line per epoch; "auto": 1 on a terminal.
VERBOSITY = (0, 1, 2, "auto")


class Lines:
    """verbose=2: one line per epoch.

    Args:
        epochs: the number after the fit's last epoch.
        steps: the steps of an epoch where known before it runs (None: a stream of unknown length).
    """

    def __init__(self, epochs: int, steps: int | None) -> None:
        self.epochs, self.steps, self.done = epochs, steps, 0

    def begin(self, epoch: int) -> None:
        self.started, self.done = time.perf_counter(), 0

    def step(self, done: int, logs: dict) -> None:
        self.done = done

    def end(self, epoch: int, logs: dict) -> None:
        seconds = time.perf_counter() - self.started
        values = " - ".join(f"{k} {v:.6g}" for k, v in logs.items())
        print(f"epoch {epoch + 1}/{self.epochs} - {self.done} steps - {seconds:.2f}s "
              f"({1000 * seconds / max(self.done, 1):.1f} ms/step) - {values}", flush=True)

    def close(self) -> None:
        pass


class Bar(Lines):
    """verbose=1: a rich progress bar per epoch with the running loss and metrics and the time per step."""

    def begin(self, epoch: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        super().begin(epoch)
        self.progress = Progress(TextColumn(f"epoch {epoch + 1}/{self.epochs}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[info]}"), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("fit", total=self.steps, info="")

    def step(self, done: int, logs: dict) -> None:
        super().step(done, logs)
        ms = 1000 * (time.perf_counter() - self.started) / done
        values = " - ".join(f"{k} {v:.4g}" for k, v in logs.items())
        self.progress.update(self.task, completed=done, info=f"{values} - {ms:.1f} ms/step")

    def end(self, epoch: int, logs: dict) -> None:
        self.close()
        super().end(epoch, logs)

    def close(self) -> None:
        if getattr(self, "progress", None) is not None:
            self.progress.stop()
            self.progress = None


class Silent(Lines):
    """verbose=0."""

    def end(self, epoch: int, logs: dict) -> None:
        pass


#: The report of each ``verbose`` value but "auto".
REPORTS = {0: Silent, 1: Bar, 2: Lines}

__all__ = ["REPORTS", "VERBOSITY", "Bar", "Lines", "Silent"]
