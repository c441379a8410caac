"""The benches' pictures for docs/benchmarks-notebook.md, drawn by the benches themselves (``--plot
PATH``): recall against the input budget, prompt tokens against the conversation's length.

matplotlib is a dev dependency, not a runtime one: it is imported inside the functions
that draw, with the Agg backend (a PNG file, no display).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RecallByBudget = Mapping[int, Mapping[Any, Sequence[float]]]
"""A ranking bench's tally: budget → category (or question type) → recall per question."""


def _pyplot() -> Any:  # the pyplot module, imported late
    import matplotlib  # noqa: PLC0415  # a dev dependency: only when asked for a plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def overall(tally: RecallByBudget) -> dict[int, float]:
    """Budget → mean recall over every question."""
    return {
        budget: statistics.fmean(v for values in groups.values() for v in values)
        for budget, groups in tally.items()
    }


def by_group(tally: RecallByBudget, groups: Sequence[Any]) -> dict[Any, dict[int, float]]:
    """Group → budget → mean recall (groups without questions left out)."""
    return {
        group: {b: statistics.fmean(by[group]) for b, by in tally.items() if by.get(group)}
        for group in groups
        if any(by.get(group) for by in tally.values())
    }


def plot_recall(
    path: Path,
    title: str,
    strategies: Mapping[str, RecallByBudget],
    groups: Mapping[Any, str],
    grouped_by: str,
) -> None:
    """Two panels against the budget (log scale): overall recall of each strategy (the
    first is the service's), and the first's recall by group (``groups``: key → label;
    ``grouped_by`` names them: "category", "question type")."""
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for number, (label, tally) in enumerate(strategies.items()):
        points = overall(tally)
        left.plot(
            list(points),
            list(points.values()),
            marker="o",
            linewidth=2.5 if number == 0 else 1.5,
            linestyle="-" if number == 0 else "--",
            label=label,
        )
    first = next(iter(strategies.values()))
    for group, points in by_group(first, list(groups)).items():
        right.plot(list(points), list(points.values()), marker="o", label=groups[group])
    budgets = sorted({b for tally in strategies.values() for b in tally})
    first_label = next(iter(strategies))
    for axes, heading in ((left, "overall"), (right, f"{first_label}, by {grouped_by}")):
        axes.set_xscale("log", base=2)
        axes.set_xticks(budgets, [f"{b:,}" for b in budgets])
        axes.minorticks_off()
        axes.set_xlabel("input budget (tokens)")
        axes.set_ylim(0, 1.02)
        axes.grid(True, alpha=0.3)
        axes.set_title(heading, fontsize=10)
        axes.legend(fontsize=8, loc="lower right")
    left.set_ylabel("evidence recall")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"wrote {path}")


def plot_prompt_tokens(path: Path, title: str, series: Mapping[str, Sequence[int]]) -> None:
    """Prompt tokens of each turn (1-based) for each strategy, against the turn number."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 4.2))
    for label, tokens in series.items():
        axes.plot(range(1, len(tokens) + 1), tokens, linewidth=1.5, label=label)
    axes.set_xlabel("turn (conversation length)")
    axes.set_ylabel("prompt tokens")
    axes.set_yscale("log")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=9)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"wrote {path}")
