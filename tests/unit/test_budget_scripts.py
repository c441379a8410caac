"""No prompt over the input budget, whatever the script (SPEC 5.3): Thai, CJK and emoji
cost several tokens per character, so a character-bounded window can be far over it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_bot.memory.context import ContextBudget, assemble_context
from llm_bot.memory.long_term import LongTermBundle, SemanticFact
from llm_bot.memory.memory_message import is_memory_message
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.shortening import shorten_middle
from llm_bot.memory.tokens import CharEstimateCounter, TiktokenCounter, TokenCounter
from llm_bot.memory.topic_state import RecalledRecord

SCRIPTS = {
    "english": "abcdefghij klmnop qrstuv wxyz ",
    "thai": "กขคงจฉชซญดตถทนบปผพฟมยรลวศสหอฮะาิีึืุูเแโใไ่้๊๋ ",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "emoji": "😀😂🥲🙏👍🏽🎉🔥❤️‍🔥🇹🇭",
}
TEXTS = st.sampled_from(list(SCRIPTS.values())).flatmap(
    lambda alphabet: st.text(alphabet=alphabet, min_size=1, max_size=600)
)
COUNTERS: tuple[TokenCounter, ...] = (TiktokenCounter(), CharEstimateCounter())
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def window_of(texts: list[str]) -> tuple[ChatMessage, ...]:
    """Whole turns of a user message and a reply; the last text is the current message."""
    messages: list[ChatMessage] = []
    for turn, text in enumerate(texts[:-1], start=1):
        for seq, role in enumerate(("user", "assistant")):
            messages.append(
                ChatMessage(
                    id=f"m{turn}{role}",
                    role=role,
                    content=text,
                    created_at="2025-01-01",
                    turn=turn,
                    seq=seq,
                )
            )
    messages.append(
        ChatMessage(
            id="current",
            role="user",
            content=texts[-1],
            created_at="2025-01-01",
            turn=len(texts),
            seq=0,
        )
    )
    return tuple(messages)


@SETTINGS
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=6),
    memory=st.lists(TEXTS, max_size=5),
    limit=st.integers(min_value=120, max_value=3000),
    counter=st.sampled_from(COUNTERS),
)
def test_no_prompt_over_budget_in_any_script(
    texts: list[str], memory: list[str], limit: int, counter: TokenCounter
) -> None:
    """Whatever the scripts of window, memory and current message, the prompt fits; the
    current turn is always there, the dropped window turns are the oldest."""
    window = window_of(texts)
    bundle = LongTermBundle(
        facts=tuple(
            SemanticFact(
                id=f"f{n}",
                fact=t,
                confidence=0.5,
                salience=0.5,
                created_at="2025-01-01",
                updated_at="2025-01-01",
            )
            for n, t in enumerate(memory)
        )
    )
    recalled = [RecalledRecord(id=f"r{n}", text=t, score=0.7) for n, t in enumerate(memory)]
    budget = ContextBudget(max_context_tokens=limit + 300, max_output_tokens=200, safety_margin=100)
    result = assemble_context(
        system_prompt="You are helpful.",
        bundle=bundle,
        summary=" ".join(memory),
        window=window,
        budget=budget,
        counter=counter,
        recalled=recalled,
    )
    assert not result.over_budget
    assert result.tokens == counter.count_messages(result.messages) <= limit
    sent = [m for m in result.messages if m["role"] != "system" and not is_memory_message(m)]
    assert sent[-1]["role"] == "user"
    if not result.shortened:
        assert sent[-1]["content"] == texts[-1]
    dropped = result.dropped["window_turns"]
    kept = [m.to_openai() for m in window if m.turn > dropped]
    assert sent[:-1] == kept[:-1]


@given(text=st.text(max_size=300), keep=st.integers(min_value=0, max_value=400))
def test_shortening_keeps_both_ends_and_says_how_much_went(text: str, keep: int) -> None:
    """The kept characters come from the start and the end; the marker counts the rest."""
    short = shorten_middle(text, keep)
    if keep >= len(text):
        assert short == text
        return
    head, _, rest = short.partition("\n…[")
    count, _, tail = rest.partition(" characters left out to fit the context budget]…\n")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + len(tail) == keep
    assert int(count) == len(text) - keep
