"""Duplicate replay: an event processed before (a redelivery) ends at ``recall``; what it
produced is republished, and the steps after its commit that a crash may have cut short
are done again (the round's timeout schedule, the result of a flow it ended)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from langgraph.graph import END
from langgraph.types import Command

from llm_bot.contract import CandidateV1, FlowResultV1
from llm_bot.graph.commit import turn_job
from llm_bot.graph.tool_rounds import RoundDeadlines
from llm_bot.memory.working import ProcessedEvent, Recalled
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent
from llm_bot.service.flow_runner import FlowRunner, FlowTurn

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DuplicateReplay:
    """What replaying a duplicate needs: the time, the round schedule, the flows."""

    clock: Callable[[], datetime]
    deadlines: RoundDeadlines
    flows: FlowRunner | None
    """None: no persona runs a flow (no flow result to publish again)."""

    async def __call__(
        self, event: ChatEvent, recalled: Recalled, processed: ProcessedEvent
    ) -> Command[str]:
        """The route ``duplicate``, with the candidate and memory job of the first run (and
        the result of the flow it ended, while that flow's checkpoint says it may not have
        gone out)."""
        log.info("event.duplicate", turn=processed.turn)
        update: dict[str, Any] = {"route": Route.DUPLICATE, "recalled": recalled}
        tokens = None
        if processed.candidate_json:
            candidate = CandidateV1.model_validate_json(processed.candidate_json)
            update["candidate"] = candidate
            tokens = candidate.usage.input_tokens
        update["job"] = turn_job(event, processed.turn, tokens, self.clock())
        await self.deadlines.keep(event.key, None, recalled.memory.tool_round)
        if processed.flow_result_json and self.flows is not None:
            result = FlowResultV1.model_validate_json(processed.flow_result_json)
            # Its checkpoint goes only after the result was published: still there, the
            # result may not have gone out (a crash in between), so it goes (again).
            if await self.flows.holds(event.key, result.id):
                update["flow_turn"] = FlowTurn(result.flow, "", result)
        return Command(update=update, goto=END)
