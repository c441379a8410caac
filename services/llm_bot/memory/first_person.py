"""A message in the first person names its writer (SPEC 5.7): "How many citrus fruits have I
used in my cocktails?" asks about what the user said, as "What did Melanie paint?" asks
about what Melanie said.

The search ranks what a speaker the message names said as one more ranking
(``ranking.speaker_ranking``); a message that speaks of its writer names the user
who sends it, the **asker**, whose entries have the speaker ``ASKER`` (a live message
carries no display name, so its speaker is its role, ``recall_items.speaker_of``). Without
it, the assistant's long answers about the same things (the recipes, with every fruit
named) outrank the short messages in which the user said what they did. Measured on the
LongMemEval development set (docs/benchmarks-notebook.md, "The first person names the asker").

The first person: the English singular pronouns I, me, my, mine, myself and I'm, I've,
I'd, I'll (any case, either apostrophe; the "i" of "i.e." is none), and the Thai ฉัน
(ดิฉัน holds it), ผม (not in a compound about hair: ตัดผม, สระผม, ทำผม, ทรงผม, สีผม, เส้นผม,
ย้อมผม, หวีผม, ผมร่วง) and เรา (not the เราะ of ไพเราะ). Thai is written without spaces between
words, so these are found inside words; left out: หนู (also "mouse", and a way to address a
child), กู, ข้า and เค้า (rude, archaic, or also "he/she").
"""

from __future__ import annotations

import re
from typing import Final

ASKER: Final = "user"
"""The speaker of the user's own entries: a live message's role (no display name)."""

_ENGLISH: Final = re.compile(
    r"(?<![\w'\u2019])(?:i(?:['\u2019](?:m|ve|d|ll))?|me|my|mine|myself)(?![\w'\u2019])(?!\.\w)",
    re.IGNORECASE,
)
_THAI: Final = re.compile(
    "|".join(
        (
            "ฉัน",
            "(?<!ตัด)(?<!สระ)(?<!ทำ)(?<!ทรง)(?<!สี)(?<!เส้น)(?<!ย้อม)(?<!หวี)ผม(?!ร่วง)",
            "เรา(?!ะ)",
        )
    )
)


def speaks_of_writer(text: str) -> bool:
    """Whether ``text`` is in the first person singular (English or Thai; see above)."""
    return _ENGLISH.search(text) is not None or _THAI.search(text) is not None


def asker_of(text: str) -> str | None:
    """The speaker a message names by speaking of its writer: ``ASKER``, or None."""
    return ASKER if speaks_of_writer(text) else None


__all__ = ["ASKER", "asker_of", "speaks_of_writer"]
