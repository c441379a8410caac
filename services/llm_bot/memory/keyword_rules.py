"""Keyword tables of the classification fallback (SPEC 5.5): immutable data, no logic.

The event types, the event cues with their base importance, the urgency and anger cues
and boosts and the topic tags that
:func:`llm_bot.memory.classification.classify_by_keywords` reads (the filler vocabulary
:func:`llm_bot.memory.classification.is_filler` reads is ``filler_words.py``). How cues are matched (normalisation,
whole English words, Thai substrings) is :mod:`llm_bot.memory.keyword_matching`.

Scoring guide (SPEC 5.5), which the tables follow:

- 0.9-1.0  transactions and urgent or angry complaints;
- 0.7-0.8  specific requests, detailed feedback, plain complaints;
- 0.5-0.6  support and basic inquiries (price, stock, when, where), shared personal details;
- 0.3-0.4  casual questions and statements nothing else recognises;
- 0.1      greetings, acknowledgements, laughter, politeness particles (filler).

The Thai politeness particles (ครับ, ค่ะ, คะ, นะ, ...) carry no meaning: they are never
cues. :mod:`llm_bot.memory.classification` re-exports ``EventType`` and ``EVENT_TYPES``
(and the tables its tests read); import them from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, get_args

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
