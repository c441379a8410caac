"""A model call's token limits (:class:`ContextBudget`) and each model family's defaults.

Below config and memory: ``Settings.context_budget()`` applies the configured overrides to
:func:`default_context_budget`, and ``memory/context.py`` assembles a prompt within one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ContextBudget:
    """Token limits of one model call; the prompt may use :attr:`input_budget` tokens."""

    max_context_tokens: int
    max_output_tokens: int
    safety_margin: int

    def __post_init__(self) -> None:
        if self.max_output_tokens < 0 or self.safety_margin < 0:
            raise ValueError("max_output_tokens and safety_margin must not be negative")
        if self.input_budget < 1:
            raise ValueError(
                "max_context_tokens must exceed max_output_tokens + safety_margin "
                f"({self.max_context_tokens} <= {self.max_output_tokens} + {self.safety_margin})"
            )

    @property
    def input_budget(self) -> int:
        return self.max_context_tokens - self.max_output_tokens - self.safety_margin


_DEFAULT_MARGIN = 256
_MODEL_LIMITS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"(chat)?gpt-4o"), 128_000, 4_096),
    (re.compile(r"gpt-4\.1"), 128_000, 4_096),
    (re.compile(r"gpt-4-turbo"), 128_000, 4_096),
    (re.compile(r"o\d"), 128_000, 4_096),
    (re.compile(r"gpt-3\.5-turbo"), 16_385, 1_024),
)
_UNKNOWN_LIMITS = (8_192, 1_024)


def default_context_budget(model: str) -> ContextBudget:
    """A sensible budget for ``model``, matched by name prefix (case-insensitive, after any
    ``provider/`` and ``ft:`` prefix); the safety margin is always 256 tokens.

    ====================================  ===========  ==========
    model family                          max_context  max_output
    ====================================  ===========  ==========
    ``gpt-4o*``, ``chatgpt-4o*``          128000       4096
    ``gpt-4.1*``                          128000       4096
    ``gpt-4-turbo*``                      128000       4096
    o-series (``o1*``, ``o3*``, ``o4*``)  128000       4096
    ``gpt-3.5-turbo*``                    16385        1024
    anything else                         8192         1024
    ====================================  ===========  ==========
    """
    name = model.strip().lower().rsplit("/", 1)[-1].removeprefix("ft:")
    context, output = next(
        ((ctx, out) for pattern, ctx, out in _MODEL_LIMITS if pattern.match(name)),
        _UNKNOWN_LIMITS,
    )
    return ContextBudget(context, output, _DEFAULT_MARGIN)
