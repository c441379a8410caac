"""A flow's progress as a pure state machine (SPEC 5.10): what to ask, and what a reply
does to the flow. The LangGraph flow graph (``flows/runner.py``) keeps this state in its
checkpoints and calls :func:`advance` once per reply; nothing here does I/O.

Rules:

- an exit intent ends the flow (``exited``) unless the reply also answers the question and
  says more than the intent ("I want to stop worrying" answers a text question);
- a reply that answers the question records it; the question's follow-ups whose condition
  holds are asked next (their replies are recorded as text, under
  ``<question id>.follow_up_<n>``);
- a reply that does not answer it asks again, ``retries`` times; then the question is
  recorded as missing (value null) and the flow moves on;
- after the last question the flow is ``completed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from llm_bot.contract import FlowAnswer, FlowResultV1
from llm_bot.flows.answers import (
    Answer,
    normalized,
    read_boolean,
    read_choice,
    read_scale,
    read_text,
    wants_to_exit,
)
from llm_bot.flows.definitions import Flow, Question
from llm_bot.memory.conversation_key import ConversationKey

Status = Literal["running", "completed", "exited"]
EXIT_REPLY_MAX_WORDS = 4
"""A reply this short that states an exit intent exits even if it reads as an answer too
("no more questions" is not "no")."""


class FlowState(TypedDict, total=False):
    """A flow in progress, as checkpointed. Answers are FlowAnswer dicts."""

    id: str
    flow: str
    persona: str
    started_at: str
    updated_at: str
    position: int
    """Index of the question being asked."""
    question: str
    """Its id: a flow redefined while running continues at the same question."""
    follow_ups: list[int]
    """Follow-ups of that question still to ask (indexes); the first is being asked."""
    attempts: int
    """Replies to the current prompt so far that did not answer it."""
    pending_raw: str | None
    """The last of those replies."""
    answers: list[dict[str, Any]]
    status: Status
    last_event: str
    """The event whose reply made this state (a redelivery of it changes nothing)."""
    prompt: str
    """What the bot said last: the question waiting for its answer, or the closing words."""


@dataclass(frozen=True)
class Reply:
    """A user's reply to the flow's prompt."""

    event_id: str
    text: str
    at: str
    """ISO time of the reply."""


def opening(
    flow: Flow, *, flow_id: str, name: str, persona: str, event_id: str, at: str
) -> FlowState:
    """The state of a flow that has just asked its first question."""
    first = question_prompt(flow.questions[0])
    return {
        "id": flow_id,
        "flow": name,
        "persona": persona,
        "started_at": at,
        "updated_at": at,
        "position": 0,
        "question": flow.questions[0].id,
        "follow_ups": [],
        "attempts": 0,
        "pending_raw": None,
        "answers": [],
        "status": "running",
        "last_event": event_id,
        "prompt": f"{flow.intro} {first}" if flow.intro else first,
    }


def question_prompt(question: Question) -> str:
    """The question as asked (a choice lists its options)."""
    if question.type == "choice" and question.options:
        return f"{question.text} ({_listed(question.options)})"
    return question.text


def retry_prompt(question: Question) -> str:
    """The question asked again, saying what kind of answer it needs."""
    hint = {
        "scale": "Please answer with a number from 1 to 10.",
        "boolean": "Please answer yes or no.",
        "choice": f"Please choose one: {_listed(question.options or [])}.",
        "text": "Please tell me in a few words.",
    }[question.type]
    return f"Sorry, I didn't catch that. {question.text} {hint}"


def read_answer(question: Question, text: str) -> Answer:
    """The deterministic reading of ``text`` as an answer to ``question``."""
    if question.type == "scale":
        return read_scale(text)
    if question.type == "boolean":
        return read_boolean(text)
    if question.type == "choice":
        return read_choice(text, question.options or ())
    return read_text(text)


def valid_value(question: Question, value: object) -> int | bool | str | None:
    """``value`` if it is a valid answer to ``question`` (a model's reading is checked
    with this), else None."""
    if question.type == "scale":
        ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10
    elif question.type == "boolean":
        ok = isinstance(value, bool)
    elif question.type == "choice":
        ok = isinstance(value, str) and value in (question.options or ())
    else:
        ok = isinstance(value, str) and bool(value.strip())
    return value if ok and isinstance(value, int | bool | str) else None


def current_question(flow: Flow, state: FlowState) -> Question | None:
    """The question whose answer (or follow-up) the flow waits for; None once it ended,
    or while a follow-up is asked (its reply is free text)."""
    if state["status"] != "running" or state["follow_ups"]:
        return None
    return flow.questions[state["position"]]


def advance(flow: Flow, state: FlowState, reply: Reply, answer: Answer) -> FlowState:
    """The state after ``reply``, read as ``answer`` (deterministically, or by the model
    when that was ambiguous)."""
    base: FlowState = {**state, "last_event": reply.event_id, "updated_at": reply.at}
    if _exits(flow, reply.text, answer):
        return {**base, "status": "exited", "prompt": flow.exited_text}
    question = flow.questions[state["position"]]
    attempts = state["attempts"] + 1
    pending = state["follow_ups"]
    if pending:
        record = _answer(f"{question.id}.follow_up_{pending[0] + 1}", reply.text, reply, 1)
        return _move_on(flow, base, [*state["answers"], record], pending[1:])
    if answer.answered:
        record = _answer(question.id, answer.value, reply, attempts)
        follow = [i for i, f in enumerate(question.follow_ups) if f.when.holds(answer.value)]  # type: ignore[arg-type]
        return _move_on(flow, base, [*state["answers"], record], follow)
    if attempts > question.retries:
        record = _answer(question.id, None, reply, attempts)
        return _move_on(flow, base, [*state["answers"], record], [])
    return {
        **base,
        "attempts": attempts,
        "pending_raw": reply.text,
        "prompt": retry_prompt(question),
    }


def realigned(flow: Flow | None, state: FlowState) -> FlowState | None:
    """``state`` on ``flow`` as it is defined now (the personas file may have changed since
    the flow started): at the same question wherever it moved, with only the follow-ups
    that still exist; None when the flow or that question is gone."""
    if flow is None:
        return None
    wanted = state.get("question")
    ids = [q.id for q in flow.questions]
    if wanted is None:  # a state from before question ids were kept
        position = state["position"]
        return state if position < len(ids) else None
    if wanted not in ids:
        return None
    position = ids.index(wanted)
    count = len(flow.questions[position].follow_ups)
    return {
        **state,
        "position": position,
        "follow_ups": [i for i in state["follow_ups"] if i < count],
    }


def abandoned(state: FlowState, reply: Reply, text: str) -> FlowState:
    """The flow ended because its definition no longer has the question it waited on."""
    return {
        **state,
        "last_event": reply.event_id,
        "updated_at": reply.at,
        "status": "exited",
        "prompt": text,
    }


def _exits(flow: Flow, text: str, answer: Answer) -> bool:
    if not wants_to_exit(text, flow.exit_intents):
        return False
    return not answer.answered or len(normalized(text).split()) <= EXIT_REPLY_MAX_WORDS


def _answer(
    question_id: str, value: int | bool | str | None, reply: Reply, attempts: int
) -> dict[str, Any]:
    return FlowAnswer(
        question_id=question_id, value=value, raw=reply.text, attempts=attempts
    ).model_dump()


def _move_on(
    flow: Flow, base: FlowState, answers: list[dict[str, Any]], follow_ups: Sequence[int]
) -> FlowState:
    position = base["position"]
    moved: FlowState = {**base, "answers": answers, "attempts": 0, "pending_raw": None}
    if follow_ups:
        text = flow.questions[position].follow_ups[follow_ups[0]].text
        return {**moved, "follow_ups": list(follow_ups), "prompt": text}
    if position + 1 >= len(flow.questions):
        return {**moved, "follow_ups": [], "status": "completed", "prompt": flow.completed_text}
    following = flow.questions[position + 1]
    return {
        **moved,
        "position": position + 1,
        "question": following.id,
        "follow_ups": [],
        "prompt": question_prompt(following),
    }


def flow_result(
    flow: Flow | None,
    state: FlowState,
    key: ConversationKey,
    *,
    status: Literal["completed", "exited", "expired"],
    finished_at: datetime,
) -> FlowResultV1:
    """The result of a flow that ended: every question, answered, missing or never asked
    (value null, attempts 0), in the flow's order, follow-ups after their question (the
    flow no longer defined: the answers recorded, in the order given)."""
    given: dict[str, list[dict[str, Any]]] = {}
    for record in state["answers"]:
        given.setdefault(record["question_id"].split(".", 1)[0], []).append(record)
    answers: list[FlowAnswer] = []
    if flow is None:
        answers = [FlowAnswer.model_validate(r) for r in state["answers"]]
    for index, question in enumerate(flow.questions if flow is not None else ()):
        records = given.get(question.id)
        if records:
            answers.extend(FlowAnswer.model_validate(r) for r in records)
        elif index == state["position"]:  # waiting for its answer when the flow ended
            raw, attempts = state.get("pending_raw"), state["attempts"]
            answers.append(
                FlowAnswer(question_id=question.id, value=None, raw=raw, attempts=attempts)
            )
        else:
            answers.append(FlowAnswer(question_id=question.id, value=None, raw=None, attempts=0))
    return FlowResultV1(
        id=state["id"],
        flow=state["flow"],
        tenant_id=key.tenant_id,
        user_id=key.user_id,
        conversation_id=key.conversation_id,
        status=status,
        answers=answers,
        started_at=datetime.fromisoformat(state["started_at"]),
        finished_at=finished_at,
    )


def _listed(options: Sequence[str]) -> str:
    if len(options) < 2:
        return "".join(options)
    return f"{', '.join(options[:-1])} or {options[-1]}"
