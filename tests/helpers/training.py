"""A plain training loop over a task module's ``step`` (no Trainer): the domains' learning tests
check that every model learns on tiny data without Lightning's machinery in the way."""

from __future__ import annotations

from typing import Any, Callable, Iterable


def train_loop(module: Any, opt: Any, epochs: int, batches: Callable[[], Iterable[Any]]) -> list[float]:
    """``epochs`` passes over ``batches()``, one optimiser step per batch on
    ``module.step(batch, "train").loss``; returns the losses and leaves the module in eval mode."""
    losses = []
    module.train()
    for _ in range(epochs):
        for batch in batches():
            opt.zero_grad()
            loss = module.step(batch, "train").loss
            loss.backward()
            opt.step()
            losses.append(loss.item())
    module.eval()
    return losses
