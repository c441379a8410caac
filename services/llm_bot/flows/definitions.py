"""Flows declared as data (SPEC 5.10): the questions of a structured dialogue, validated
when the personas file is loaded.

    flows:
      checkin:
        questions:
          - id: mood
            type: scale            # scale (1-10) | boolean | choice | text
            text: How are you feeling today, from 1 to 10?
            retries: 2             # asked again this often, then recorded as missing
            follow_ups:            # at most 2, each asked when its condition holds
              - text: I'm sorry to hear that. What is weighing on you?
                when: {at_most: 4}
          - id: slept
            type: boolean
            text: Did you sleep well last night?
          - id: drink
            type: choice
            options: [coffee, tea, water]
            text: What will you drink this morning?
        exit_intents: [enough for today]   # besides the built-in ones (stop, bye, ไม่ทำแล้ว)
        intro: Time for a short check-in.  # optional, said before the first question
        completed_text: Thanks, that's all.  # optional: said when every question is done
        exited_text: Okay, let's stop here.  # optional: said when the user exits
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

QuestionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Prose = Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=r"\S")]
DEFAULT_RETRIES = 2
MAX_FOLLOW_UPS = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Condition(_Strict):
    """When a follow-up is asked: an answer at most / at least a number (scale), equal to
    a value (boolean, choice), or any answer (no condition)."""

    at_most: int | None = None
    at_least: int | None = None
    equals: bool | str | None = None

    def holds(self, value: int | bool | str) -> bool:
        if self.at_most is not None and not (isinstance(value, int) and value <= self.at_most):
            return False
        if self.at_least is not None and not (isinstance(value, int) and value >= self.at_least):
            return False
        return self.equals is None or value == self.equals


class FollowUp(_Strict):
    text: Prose
    when: Condition = Field(default_factory=Condition)


class Question(_Strict):
    id: QuestionId
    type: Literal["scale", "boolean", "choice", "text"]
    text: Prose
    options: list[Prose] | None = Field(None, min_length=2, max_length=20)
    retries: int = Field(DEFAULT_RETRIES, ge=0, le=5)
    follow_ups: list[FollowUp] = Field(default_factory=list, max_length=MAX_FOLLOW_UPS)

    @model_validator(mode="after")
    def _options_fit_the_type(self) -> Question:
        if (self.type == "choice") != (self.options is not None):
            raise ValueError("options are required for type choice, and only for it")
        for follow_up in self.follow_ups:
            when = follow_up.when
            numeric = when.at_most is not None or when.at_least is not None
            if numeric and self.type != "scale":
                raise ValueError("at_most/at_least conditions are for scale questions")
            wanted = when.equals
            if self.type == "choice" and wanted is not None and wanted not in (self.options or ()):
                raise ValueError(f"follow-up condition {wanted!r} is not an option")
            if self.type == "boolean" and wanted is not None and not isinstance(wanted, bool):
                raise ValueError("a boolean question's condition is true or false")
        return self


class Flow(_Strict):
    questions: list[Question] = Field(min_length=1, max_length=50)
    exit_intents: list[Prose] = Field(default_factory=list, max_length=50)
    intro: Prose | None = None
    """Said before the first question."""
    completed_text: Prose = "Thank you, that's everything I wanted to ask."
    exited_text: Prose = "All right, we'll stop here. Thank you for your time."

    @model_validator(mode="after")
    def _unique_ids(self) -> Flow:
        ids = [q.id for q in self.questions]
        if len(set(ids)) != len(ids):
            raise ValueError("question ids must be unique within a flow")
        return self
