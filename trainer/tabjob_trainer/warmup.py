"""torch's one-time start-up costs paid beside the trees' fits, not out of a network's share of the time.

A process's first torch optimizer imports ``torch._dynamo`` (about 1.6 s on this project's 2-CPU machine, torch
2.15), and its first network fit paid that out of its share of the time limit: on tables of a few hundred rows,
where a config's share is a second or two, the first NN_TORCH fold on each rank stopped after one epoch and its
out-of-fold predictions were noise (mpg: -4.86 rmse out of fold against -1.90 for the family's second config, the
fold after it on the same rank trained 19 epochs in 0.3 s). The warm-up runs on a thread from the moment torch is
imported, while the data loads and the trees train (LightGBM, XGBoost and CatBoost release the GIL as they
compute); the scheduler waits for it before the first round with a network, on the job's clock, so what is not
hidden is charged to every config alike.
"""

from __future__ import annotations

import contextlib
import threading


def warm_torch() -> None:
    """What a network fit's first steps would otherwise load: the optimizer machinery (and with it dynamo)."""
    import torch

    parameter = torch.nn.Parameter(torch.zeros(1))
    torch.optim.AdamW([parameter], lr=1e-3).step()


class WarmUp:
    """``warm_torch`` on a daemon thread; ``wait`` returns once it is done (at once when it never started)."""

    def __init__(self, start: bool) -> None:
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="torch-warm-up", daemon=True)
            self._thread.start()

    @staticmethod
    def _run() -> None:
        # A torch that cannot build an optimizer fails the network's fit too, which says why in its row.
        with contextlib.suppress(Exception):
            warm_torch()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
