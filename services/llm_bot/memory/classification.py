"""Classification of user messages into notable events (SPEC 5.5).

Each user message gets an event type, an importance score in [0, 1], a short summary and
topic tags. The model path asks the model for structured output
(:func:`classification_json_schema`, validated by :func:`parse_model_classification`);
when the model fails or returns junk, :func:`classify_by_keywords` classifies the text
deterministically from English and Thai keyword tables.

Scoring guide (SPEC 5.5), which the keyword tables follow:

- 0.9-1.0  transactions and urgent or angry complaints;
- 0.7-0.8  specific requests, detailed feedback, plain complaints;
- 0.5-0.6  support and basic inquiries (price, stock, when, where), shared personal details;
- 0.3-0.4  casual questions and statements nothing else recognises;
- 0.1      greetings, acknowledgements, laughter, politeness particles (filler).

Matching rules: text and cues are compared after NFKC normalisation and case folding
(NFKC matters for Thai: it splits SARA AM, as in แนะนำ). English cues are whole words or
phrases (any run of whitespace between words); Thai has no spaces between words, so Thai
cues are substrings of the text with its whitespace removed. The Thai politeness
particles (ครับ, ค่ะ, คะ, นะ, ...) carry no meaning: they are never cues, and a message of
particles and greetings alone is filler (:func:`is_filler`, which also decides when
retrieval is skipped, SPEC 5.7). Particles are not stripped before matching, because they
occur inside words (แนะนำ contains นะ, คะแนน contains คะ).

Everything here is pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

EventType = Literal[
    "INQUIRY",
    "FEEDBACK",
    "REQUEST",
    "COMPLAINT",
    "TRANSACTION",
    "SUPPORT",
    "INFORMATION",
    "GENERIC_EVENT",
]
EVENT_TYPES: Final[tuple[EventType, ...]] = get_args(EventType)

SUMMARY_MAX_CHARS: Final = 200
"""Upper bound of a stored summary (the model's summary is shortened to it)."""
KEYWORD_SUMMARY_CHARS: Final = 120
"""Length the keyword fallback trims the message text to, for its summary."""
MAX_TAGS: Final = 8

_IMPORTANCE_GUIDE = (
    "Importance from 0.0 to 1.0: 0.9-1.0 transactions and urgent complaints; "
    "0.7-0.8 specific requests and detailed feedback; 0.5-0.6 support and basic "
    "inquiries; 0.3-0.4 casual questions and general information; 0.1-0.2 greetings "
    "and small talk."
)


def _normalise_tags(tags: list[str]) -> list[str]:
    """Tags stripped and lowercased, empty ones dropped, duplicates removed (first kept)."""
    seen: dict[str, None] = {}
    for tag in tags:
        clean = " ".join(tag.split()).lower()
        if clean:
            seen.setdefault(clean, None)
    return list(seen)


class Classification(BaseModel):
    """A classified user message: the payload of a notable event (SPEC 5.5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: EventType
    importance: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    summary: str = Field(max_length=SUMMARY_MAX_CHARS)
    tags: list[str] = Field(default_factory=list)
    source: Literal["model", "keywords"]

    @field_validator("tags")
    @classmethod
    def _tags_lowercase_and_few(cls, tags: list[str]) -> list[str]:
        clean = _normalise_tags(tags)
        if len(clean) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags")
        return clean


class ModelClassification(BaseModel):
    """What the model returns under structured output: a Classification without ``source``.

    Strict: wrong types (a string for ``importance``, an unknown event type), missing or
    extra fields and an importance outside [0, 1] are rejected, so the caller falls back
    to the keywords. Lengths are not part of the schema (not every OpenAI-compatible
    provider supports them in strict mode); over-long summaries and tag lists are
    shortened on conversion instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    event_type: EventType = Field(description="The kind of event the user message is.")
    importance: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description=_IMPORTANCE_GUIDE)
    summary: str = Field(
        description="One short sentence (at most 200 characters) saying what the user wants."
    )
    tags: list[str] = Field(
        description="Up to 8 lowercase topic keywords in English, e.g. price, refund, delivery."
    )

    def to_classification(self) -> Classification:
        """The stored form: summary and tags shortened to their bounds, ``source="model"``."""
        return Classification(
            event_type=self.event_type,
            importance=self.importance,
            summary=shorten(self.summary, SUMMARY_MAX_CHARS),
            tags=_normalise_tags(self.tags)[:MAX_TAGS],
            source="model",
        )


# Keywords of the JSON schema that every strict structured-output implementation accepts.
_SCHEMA_KEYWORDS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "items", "description"}
)


def _strict_subset(node: dict[str, Any]) -> dict[str, Any]:
    """A JSON-schema node reduced to the strict-mode subset, recursively."""
    kept = {key: value for key, value in node.items() if key in _SCHEMA_KEYWORDS}
    if "properties" in kept:
        kept["properties"] = {
            name: _strict_subset(prop) for name, prop in kept["properties"].items()
        }
        kept["required"] = list(kept["properties"])
        kept["additionalProperties"] = False
    if "items" in kept:
        kept["items"] = _strict_subset(kept["items"])
    return kept


def classification_json_schema() -> dict[str, Any]:
    """The schema of :class:`ModelClassification` for OpenAI structured output.

    Send it as ``response_format={"type": "json_schema", "json_schema": {"name":
    "classification", "strict": True, "schema": classification_json_schema()}}``. It is
    strict-mode compatible: ``additionalProperties: false``, every property required, no
    titles, defaults or numeric/length constraints (ranges are described in prose and
    enforced by :func:`parse_model_classification`). A fresh copy on every call.
    """
    schema = _strict_subset(ModelClassification.model_json_schema())
    schema["description"] = "The classification of one user message."
    return schema


_FENCE = re.compile(r"^```(?:json)?\s*(?P<body>.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def parse_model_classification(text: str) -> Classification | None:
    """The model's JSON as a Classification, or None when it is junk or out of range.

    A JSON object in a Markdown code fence is accepted (providers without structured
    output sometimes wrap it); anything else that is not exactly the schema is rejected.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body")
    try:
        parsed = ModelClassification.model_validate_json(body)
    except ValidationError:
        return None
    return parsed.to_classification()


# ---------------------------------------------------------------------------
# Keyword tables (immutable constants)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeywordRule:
    """A cue for an event type: English words/phrases, Thai substrings, raw patterns.

    ``patterns`` are regular expressions matched against the lowercased text with its
    whitespace collapsed (for cues with a gap, such as ช่วย…หน่อย, or punctuation).
    """

    event_type: EventType
    importance: float
    english: tuple[str, ...] = ()
    thai: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicRule:
    """A topic tag and the English words/phrases and Thai substrings that signal it."""

    tag: str
    english: tuple[str, ...] = ()
    thai: tuple[str, ...] = ()


URGENCY_CUES: Final = KeywordRule(
    "GENERIC_EVENT",
    0.0,
    english=(
        "urgent",
        "urgently",
        "asap",
        "immediately",
        "right now",
        "right away",
        "as soon as possible",
        "emergency",
    ),
    thai=("ด่วน", "ทันที", "เดี๋ยวนี้", "โดยเร็ว", "รีบๆ"),
    patterns=(r"(?<![a-z0-9])now!",),
)
"""Urgency raises the score of any event; a complaint with it becomes critical."""

ANGER_CUES: Final = KeywordRule(
    "COMPLAINT",
    0.0,
    english=(
        "angry",
        "furious",
        "unacceptable",
        "ridiculous",
        "worst",
        "scam",
        "outrageous",
        "fed up",
        "very disappointed",
    ),
    thai=("ไม่พอใจมาก", "โกรธ", "โมโห", "แย่มาก", "แย่ที่สุด", "ห่วยมาก", "โกง", "ผิดหวังมาก"),
    patterns=(r"!!",),
)
"""Anger makes a complaint (or a transaction) weigh more; anger cues are complaint cues."""

URGENCY_BOOST: Final[Mapping[EventType, float]] = MappingProxyType(
    {"COMPLAINT": 0.15, "TRANSACTION": 0.05, "REQUEST": 0.05, "SUPPORT": 0.05, "INQUIRY": 0.05}
)
"""Added for urgency: it lifts a complaint into the critical band, others within theirs."""
ANGER_BOOST: Final[Mapping[EventType, float]] = MappingProxyType(
    {"COMPLAINT": 0.15, "TRANSACTION": 0.05}
)
"""Added for anger; an angry and urgent complaint reaches 1.0."""

FILLER_IMPORTANCE: Final = 0.1
UNRECOGNISED_IMPORTANCE: Final = 0.3
CASUAL_QUESTION_IMPORTANCE: Final = 0.35

EVENT_RULES: Final[tuple[KeywordRule, ...]] = (
    KeywordRule(
        "TRANSACTION",
        0.9,
        english=(
            "refund",
            "refunds",
            "refunded",
            "money back",
            "charged twice",
            "double charged",
            "charged",
            "overcharged",
            "cancel my order",
            "cancel the order",
            "cancel order",
            "cancel my subscription",
            "payment",
            "pay",
            "paid",
            "invoice",
            "billing",
            "purchase",
            "buy",
            "checkout",
            "place an order",
            "place order",
            "bank transfer",
            "credit card",
        ),
        thai=(
            "โอนเงิน",
            "คืนเงิน",
            "ชำระเงิน",
            "ชำระ",
            "สั่งซื้อ",
            "ยกเลิก",
            "จ่ายเงิน",
            "ซื้อ",
            "เก็บเงินปลายทาง",
            "ผ่อน",
            "ตัดบัตร",
            "หักเงิน",
            "ใบเสร็จ",
            "ออเดอร์",
            "สลิป",
        ),
        patterns=(r"(?<![a-z0-9])order\s*#?\s*\d",),
    ),
    KeywordRule(
        "COMPLAINT",
        0.75,
        english=(
            "complaint",
            "complain",
            "not satisfied",
            "unsatisfied",
            "dissatisfied",
            "unhappy",
            "disappointed",
            "terrible",
            "awful",
            "bad service",
            "poor service",
            "broken",
            "damaged",
            "defective",
            "wrong item",
            "never arrived",
            "still not arrived",
            "hasn't arrived",
            *ANGER_CUES.english,
        ),
        thai=(
            "ไม่พอใจ",
            "เสียหาย",
            "สินค้าเสีย",
            "ของเสีย",
            "ชำรุด",
            "พัง",
            "ผิดหวัง",
            "แย่",
            "ห่วย",
            "ไม่ดี",
            "ของไม่ครบ",
            "ได้ของผิด",
            "ส่งผิด",
            "ส่งช้า",
            "ช้ามาก",
            "ยังไม่ได้รับ",
            "ร้องเรียน",
            *ANGER_CUES.thai,
        ),
    ),
    KeywordRule(
        "REQUEST",
        0.75,
        english=(
            "please change",
            "please update",
            "please send",
            "please add",
            "please remove",
            "please deliver",
            "please help me",
            "i want to",
            "i want",
            "i'd like",
            "i would like",
            "i need to",
            "can you change",
            "could you change",
            "change my",
            "update my",
            "recommend",
            "suggest",
            "book a",
            "reserve",
            "reschedule",
        ),
        thai=(
            "ขอเปลี่ยน",
            "ขอให้",
            "ขอเลื่อน",
            "ขอแก้",
            "ขอจอง",
            "อยากได้",
            "อยากจะ",
            "ต้องการ",
            "รบกวน",
            "แนะนำ",
            "จอง",
            "เลื่อน",
            "เปลี่ยน",
        ),
        patterns=(r"ช่วย.{0,40}?(?:หน่อย|ให้ที)",),
    ),
    KeywordRule(
        "FEEDBACK",
        0.7,
        english=(
            "great service",
            "good service",
            "excellent",
            "amazing",
            "love it",
            "love this",
            "loved",
            "well done",
            "very helpful",
            "satisfied",
            "happy with",
            "impressed",
            "five stars",
            "5 stars",
        ),
        thai=(
            "ดีมาก",
            "ประทับใจ",
            "ชอบมาก",
            "บริการดี",
            "เยี่ยม",
            "ถูกใจ",
            "พอใจ",
            "สุดยอด",
            "ขอชม",
            "คุณภาพดี",
            "ส่งไว",
            "ส่งเร็ว",
        ),
    ),
    KeywordRule(
        "INFORMATION",
        0.6,
        english=(
            "my address is",
            "my phone is",
            "my phone number is",
            "my number is",
            "my email is",
            "my name is",
            "i live in",
            "i'm allergic",
            "i am allergic",
        ),
        thai=("ที่อยู่คือ", "ที่อยู่ของ", "เบอร์โทร", "อีเมลคือ", "อีเมล์คือ", "ชื่อว่า"),
    ),
    KeywordRule(
        "SUPPORT",
        0.55,
        english=(
            "how do i",
            "how can i",
            "how to",
            "doesn't work",
            "does not work",
            "doesnt work",
            "not working",
            "isn't working",
            "won't work",
            "error",
            "help",
            "need assistance",
            "assist",
            "support",
            "can't log in",
            "cannot log in",
            "can't login",
            "forgot my password",
            "reset",
            "bug",
            "crash",
            "crashes",
            "crashing",
            "problem",
            "issue",
            "trouble",
        ),
        thai=(
            "ใช้งานไม่ได้",
            "ใช้ไม่ได้",
            "เข้าไม่ได้",
            "ล็อกอินไม่ได้",
            "ทำยังไง",
            "ทำอย่างไร",
            "วิธี",
            "ช่วยด้วย",
            "ช่วยได้ไหม",
            "ช่วยได้มั้ย",
            "มีปัญหา",
            "ปัญหา",
            "ลืมรหัส",
            "ค้าง",
        ),
    ),
    KeywordRule(
        "INQUIRY",
        0.55,
        english=(
            "how much",
            "price",
            "prices",
            "cost",
            "costs",
            "do you have",
            "do you sell",
            "in stock",
            "available",
            "availability",
            "shipping fee",
            "delivery fee",
        ),
        thai=("ราคา", "เท่าไหร่", "เท่าไร", "กี่บาท", "ค่าส่ง", "ส่งฟรี", "มีสี", "มีไซส์", "มีขนาด"),
        patterns=(r"มี.{1,30}?(?:ไหม|มั้ย|หรือเปล่า|รึเปล่า|ไม๊)",),
    ),
    KeywordRule(
        "INQUIRY",
        0.5,
        english=("when", "where", "what time", "how long", "how does", "opening hours"),
        thai=("เมื่อไหร่", "เมื่อไร", "ที่ไหน", "กี่โมง", "กี่วัน", "เปิดกี่โมง"),
    ),
)
"""Event cues, strongest first. The highest score wins; on a tie, the earlier rule."""

CASUAL_QUESTION_CUES: Final = KeywordRule(
    "INQUIRY",
    CASUAL_QUESTION_IMPORTANCE,
    english=("what", "why", "who", "which", "how", "are you", "do you", "can you", "is it"),
    thai=("ไหม", "มั้ย", "อะไร", "ทำไม", "ยังไง", "ใคร", "หรอ", "เหรอ", "หรือเปล่า", "รึเปล่า"),
    patterns=(r"\?",),
)
"""A question nothing more specific recognised: an inquiry of low importance."""

TOPIC_RULES: Final[tuple[TopicRule, ...]] = (
    TopicRule(
        "price",
        english=("price", "prices", "cost", "costs", "how much", "expensive", "cheap"),
        thai=("ราคา", "เท่าไหร่", "เท่าไร", "กี่บาท", "แพง"),
    ),
    TopicRule(
        "discount",
        english=("discount", "coupon", "promo", "promotion", "voucher"),
        thai=("ส่วนลด", "ลดราคา", "คูปอง", "โปรโมชั่น"),
    ),
    TopicRule("refund", english=("refund", "refunds", "refunded", "money back"), thai=("คืนเงิน",)),
    TopicRule(
        "payment",
        english=(
            "payment",
            "pay",
            "paid",
            "charged",
            "charged twice",
            "overcharged",
            "credit card",
            "bank transfer",
            "invoice",
            "billing",
        ),
        thai=("ชำระ", "จ่าย", "โอนเงิน", "บัตรเครดิต", "สลิป", "ตัดบัตร", "หักเงิน", "พร้อมเพย์"),
    ),
    TopicRule(
        "order",
        english=("order", "orders", "purchase", "buy", "checkout"),
        thai=("สั่งซื้อ", "ออเดอร์", "คำสั่งซื้อ", "ซื้อ"),
    ),
    TopicRule("cancellation", english=("cancel", "cancellation"), thai=("ยกเลิก",)),
    TopicRule(
        "delivery",
        english=(
            "delivery",
            "deliver",
            "shipping",
            "ship",
            "shipped",
            "arrive",
            "arrived",
            "courier",
            "tracking",
            "parcel",
            "package",
        ),
        thai=("จัดส่ง", "ส่งของ", "ค่าส่ง", "ขนส่ง", "พัสดุ", "ส่งช้า", "ส่งผิด", "ส่งไว", "ส่งเร็ว"),
    ),
    TopicRule("address", english=("address",), thai=("ที่อยู่",)),
    TopicRule("product", english=("product", "products", "item", "items"), thai=("สินค้า",)),
    TopicRule(
        "account",
        english=("account", "login", "log in", "sign in", "password"),
        thai=("บัญชี", "ล็อกอิน", "รหัสผ่าน", "เข้าสู่ระบบ"),
    ),
    TopicRule(
        "booking",
        english=("booking", "book a", "reservation", "reserve", "reschedule"),
        thai=("จอง",),
    ),
    TopicRule(
        "schedule",
        english=(
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
            "weekend",
            "tomorrow",
        ),
        thai=(
            "วันจันทร์",
            "วันอังคาร",
            "วันพุธ",
            "วันพฤหัส",
            "วันศุกร์",
            "วันเสาร์",
            "วันอาทิตย์",
            "เสาร์อาทิตย์",
            "พรุ่งนี้",
        ),
    ),
    TopicRule(
        "contact",
        english=("phone", "phone number", "email", "e-mail"),
        thai=("เบอร์", "อีเมล", "โทรศัพท์"),
    ),
    TopicRule(
        "stock", english=("in stock", "out of stock", "availability"), thai=("สต็อก", "ของหมด")
    ),
    TopicRule("recommendation", english=("recommend", "suggest"), thai=("แนะนำ",)),
    TopicRule("service", english=("service", "staff"), thai=("บริการ", "พนักงาน")),
    TopicRule(
        "technical",
        english=(
            "error",
            "bug",
            "crash",
            "crashes",
            "crashing",
            "not working",
            "doesn't work",
            "does not work",
            "doesnt work",
        ),
        thai=("ใช้งานไม่ได้", "ใช้ไม่ได้", "ค้าง", "เข้าไม่ได้"),
    ),
    TopicRule("damage", english=("broken", "damaged", "defective"), thai=("เสียหาย", "ชำรุด", "พัง")),
)
"""Topic tags, in the order they are reported (at most eight)."""

# Filler: greetings, acknowledgements, thanks, laughter and particles.
FILLER_ENGLISH: Final[tuple[str, ...]] = (
    "hi",
    "hii",
    "hello",
    "hey",
    "hi there",
    "hello there",
    "hey there",
    "good morning",
    "good afternoon",
    "good evening",
    "good night",
    "thanks",
    "thank you",
    "thank you so much",
    "thank you very much",
    "thanks a lot",
    "thanks for your help",
    "thank you for your help",
    "thanks for the help",
    "many thanks",
    "thx",
    "tks",
    "ty",
    "ok",
    "okay",
    "okey",
    "oki",
    "okie",
    "k",
    "kk",
    "yes",
    "yeah",
    "yep",
    "yup",
    "sure",
    "alright",
    "all right",
    "got it",
    "noted",
    "cool",
    "nice",
    "great",
    "awesome",
    "perfect",
    "bye",
    "goodbye",
    "see you",
    "you're welcome",
    "no problem",
    "np",
    "lol",
    "lmao",
    "hmm",
    "hm",
    "oh",
    "ah",
)
FILLER_THAI: Final[tuple[str, ...]] = (
    "สวัสดี",
    "หวัดดี",
    "ขอบคุณมาก",
    "ขอบคุณ",
    "ขอบใจ",
    "ขอบพระคุณ",
    "แต๊งกิ้ว",
    "โอเค",
    "โอเคร",
    "เค",
    "ได้เลย",
    "ได้",
    "ตกลง",
    "รับทราบ",
    "ทราบแล้ว",
    "เข้าใจแล้ว",
    "ยินดี",
    "ไม่เป็นไร",
    "บาย",
    "ลาก่อน",
    "อืม",
    "อือ",
    "อ๋อ",
    "ใช่",
    "ฮ่า",
    "ๆ",
)
THAI_PARTICLES: Final[tuple[str, ...]] = (
    "ครับผม",
    "ครับ",
    "คับ",
    "ค่ะ",
    "คะ",
    "ค่า",
    "นะ",
    "จ้า",
    "จ้ะ",
    "จ๊ะ",
    "ฮะ",
    "ฮับ",
    "เลย",
    "มาก",
)
"""Politeness particles and intensifiers that carry no meaning on their own."""

_LAUGHTER = re.compile(r"(?<!\d)(?:5{3,}|\u0e55{3,})(?!\d)|(?<![a-z])(?:ha|he|ah){2,}h?(?![a-z])")
_VARIATION_SELECTORS = frozenset(chr(code) for code in range(0xFE00, 0xFE10))
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------


def _normalise(text: str) -> str:
    """NFKC, casefolded, typographic apostrophes made plain, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_QUOTES)
    return " ".join(folded.split())


def _compact(normalised: str) -> str:
    return "".join(normalised.split())


_NEVER: Final = re.compile(r"(?!)")


def _english_regex(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Whole words or phrases; Latin-letter boundaries, so Thai next to a word still ends it."""
    if not phrases:
        return _NEVER
    ordered = sorted({_normalise(p) for p in phrases}, key=len, reverse=True)
    words = (r"\s+".join(re.escape(word) for word in phrase.split()) for phrase in ordered)
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(words) + r")(?![a-z0-9])")


def _thai_regex(thai: tuple[str, ...]) -> re.Pattern[str]:
    """Substrings (longest first), matched against the whitespace-free text."""
    if not thai:
        return _NEVER
    ordered = sorted({_compact(_normalise(s)) for s in thai}, key=len, reverse=True)
    return re.compile("|".join(re.escape(s) for s in ordered))


@functools.cache
def _compiled(
    english: tuple[str, ...], thai: tuple[str, ...], patterns: tuple[str, ...]
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The regexes of one cue set: on the normalised text, and on the whitespace-free text."""
    english_re = _english_regex(english)
    if patterns:
        nfkc = [unicodedata.normalize("NFKC", pattern) for pattern in patterns]
        english_re = re.compile("|".join([english_re.pattern, *nfkc]))
    return english_re, _thai_regex(thai)


@dataclass(frozen=True, slots=True)
class _Text:
    normalised: str
    compact: str

    @classmethod
    def of(cls, text: str) -> _Text:
        normalised = _normalise(text)
        return cls(normalised, _compact(normalised))

    def matches(
        self, english: tuple[str, ...], thai: tuple[str, ...] = (), patterns: tuple[str, ...] = ()
    ) -> bool:
        on_normalised, on_compact = _compiled(english, thai, patterns)
        return bool(on_normalised.search(self.normalised) or on_compact.search(self.compact))

    def matches_rule(self, rule: KeywordRule) -> bool:
        return self.matches(rule.english, rule.thai, rule.patterns)


# ---------------------------------------------------------------------------
# Filler
# ---------------------------------------------------------------------------


def _is_noise(char: str) -> bool:
    """Whitespace, punctuation, symbols (emoji) and invisible joiners/modifiers."""
    if char.isspace() or char in _VARIATION_SELECTORS:
        return True
    return unicodedata.category(char)[0] in {"P", "S"} or unicodedata.category(char) == "Cf"


@functools.cache
def _filler_english_regex() -> re.Pattern[str]:
    return _english_regex(FILLER_ENGLISH)


_ELONGATED_LATIN = re.compile(r"([a-z])\1{2,}")
# Thai elongation repeats the last letter ("ครับบบ", "ค่าาา"): a doubled letter at the end of
# a Thai run, or any letter three times or more. "โอเคค่ะ" keeps its two ค (a word boundary).
_ELONGATED_THAI = re.compile(r"([\u0e01-\u0e4e])\1+(?![\u0e01-\u0e4e])|([\u0e01-\u0e4e])\2{2,}")


def _collapse_thai_elongation(text: str) -> str:
    return _ELONGATED_THAI.sub(lambda match: match.group(1) or match.group(2), text)


_THAI_FILLER_LONGEST_FIRST: Final = tuple(
    sorted({_normalise(s) for s in (*FILLER_THAI, *THAI_PARTICLES)}, key=len, reverse=True)
)


def is_filler(text: str) -> bool:
    """True when the text is only greetings, thanks, acknowledgements, laughter, particles,
    emoji and punctuation ("ok", "thanks", "555", "ครับ", "👍", "hi"); also for empty text.

    Such turns carry nothing worth remembering or retrieving (SPEC 5.7). Elongations
    ("okkk", "ค่าาา") count as their short form.
    """
    residue = _LAUGHTER.sub(" ", _normalise(text))
    residue = _ELONGATED_LATIN.sub(r"\1", residue)
    residue = _filler_english_regex().sub(" ", residue)
    residue = _collapse_thai_elongation(residue)
    for phrase in _THAI_FILLER_LONGEST_FIRST:
        residue = residue.replace(phrase, " ")
    return all(_is_noise(char) for char in residue)


# ---------------------------------------------------------------------------
# Keyword classification
# ---------------------------------------------------------------------------


def _is_cut_inside_cluster(text: str, cut: int) -> bool:
    """Would cutting before ``text[cut]`` split a character from its marks or joiners?"""
    nxt = text[cut]
    return (
        unicodedata.combining(nxt) != 0
        or unicodedata.category(nxt) in {"Mn", "Mc", "Me", "Sk"}
        or nxt in _VARIATION_SELECTORS
        or nxt == "\u200d"
        or text[cut - 1] == "\u200d"
    )


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed and, if longer than ``limit``, cut to at most ``limit`` characters.

    The cut falls on a word boundary when one is near the end (English), else on a
    character boundary that keeps Thai vowels and tone marks (and emoji joiners) with
    their base character; an ellipsis marks the cut and counts toward the limit.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    budget = limit - 1  # room for the ellipsis
    space = flat.rfind(" ", 0, budget + 1)
    if space >= budget * 0.6:
        return flat[:space].rstrip() + "…"
    cut = budget
    while cut > 0 and _is_cut_inside_cluster(flat, cut):
        cut -= 1
    if cut == 0:  # nothing but marks: any cut will do
        cut = budget
    return flat[:cut].rstrip() + "…"


def _score(rule: KeywordRule, *, urgent: bool, angry: bool) -> float:
    score = rule.importance
    if urgent:
        score += URGENCY_BOOST.get(rule.event_type, 0.0)
    if angry:
        score += ANGER_BOOST.get(rule.event_type, 0.0)
    return round(min(score, 1.0), 2)


def _topic_tags(text: _Text) -> list[str]:
    return [topic.tag for topic in TOPIC_RULES if text.matches(topic.english, topic.thai)][
        :MAX_TAGS
    ]


def _best_event(text: _Text) -> tuple[float, EventType]:
    """The highest-scoring event rule that matches, else a casual question or generic event."""
    urgent = text.matches_rule(URGENCY_CUES)
    angry = text.matches_rule(ANGER_CUES)
    best: tuple[float, EventType] | None = None
    for rule in EVENT_RULES:
        if text.matches_rule(rule):
            score = _score(rule, urgent=urgent, angry=angry)
            if best is None or score > best[0]:
                best = (score, rule.event_type)
    if best is not None:
        return best
    if text.matches_rule(CASUAL_QUESTION_CUES):
        return CASUAL_QUESTION_IMPORTANCE, "INQUIRY"
    return UNRECOGNISED_IMPORTANCE, "GENERIC_EVENT"


def classify_by_keywords(text: str) -> Classification:
    """Deterministic English/Thai keyword classification, the fallback of the model path.

    Filler is a GENERIC_EVENT of importance 0.1. Otherwise every event rule that matches
    is scored (its base importance, plus the urgency and anger boosts of its type) and the
    highest score wins, the earlier rule on a tie. With no rule, a question is a casual
    INQUIRY (0.35) and anything else a GENERIC_EVENT (0.3). Never raises.
    """
    summary = shorten(text, KEYWORD_SUMMARY_CHARS)
    if is_filler(text):
        return Classification(
            event_type="GENERIC_EVENT",
            importance=FILLER_IMPORTANCE,
            summary=summary,
            tags=[],
            source="keywords",
        )
    prepared = _Text.of(text)
    importance, event_type = _best_event(prepared)
    return Classification(
        event_type=event_type,
        importance=importance,
        summary=summary,
        tags=_topic_tags(prepared),
        source="keywords",
    )


__all__ = [
    "EVENT_TYPES",
    "Classification",
    "EventType",
    "ModelClassification",
    "classification_json_schema",
    "classify_by_keywords",
    "is_filler",
    "parse_model_classification",
    "shorten",
]
