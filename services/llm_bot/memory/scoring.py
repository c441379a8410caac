"""The scores a search ranks by that are not a vector product: Okapi BM25 of keyword
terms, and the day numbers a period of time is matched on."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date

import numpy as np
import numpy.typing as npt

from llm_bot.memory.time_expressions import Period
from llm_bot.memory.vectors import Vector

BM25_K1 = 1.2


BM25_B = 0.75


def bm25(tf: Vector, lengths: Vector, df: int, count: int, average: float) -> Vector:
    """One query term's BM25 contribution to the entries that hold it ``tf`` times, among
    ``count`` entries (``df`` of them holding it) of ``lengths`` terms, ``average`` on
    average."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / average)
    return (idf(df, count) * tf * (BM25_K1 + 1) / (tf + norm)).astype(np.float32, copy=False)


def idf(df: int, count: int) -> float:
    """BM25's inverse document frequency of a term ``df`` of ``count`` entries hold (the
    Lucene form: never negative)."""
    return math.log(1 + (count - df + 0.5) / (df + 0.5))


def days_within(days: npt.NDArray[np.int32], periods: Sequence[Period]) -> npt.NDArray[np.bool_]:
    """By day number (``day_number``; 0: no date, in no period): whether it falls in one of
    ``periods``."""
    inside = np.zeros(days.size, dtype=np.bool_)
    for period in periods:
        inside |= (days >= period.first.toordinal()) & (days <= period.last.toordinal())
    return inside


def day_number(created_at: str) -> int:
    """The day of an ISO date or timestamp as ``date.toordinal`` (its own UTC offset's day);
    0 when it is not one."""
    try:
        return date.fromisoformat(created_at[:10]).toordinal()
    except ValueError:
        return 0
