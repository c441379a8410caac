// llm-bot's TypeScript client: docs/contract.md "Clients", and README.md here.
export { Client, DEFAULT_AMQP_URL, candidateId } from "./client.js";
export type { AskOptions, ClientOptions, Ids } from "./client.js";
export { BrokerUnavailable, ClientError, EventFailed, EventInvalid, NotDelivered, ReplyTimeout, StreamDiverged } from "./errors.js";
export { checked, newEventId } from "./events.js";
export type { InternalEventV2, ToolDefinition, TranscriptMessage } from "./generated/internal.event.v2.js";
export type { CandidateV1, CandidateToolCall } from "./generated/candidate.v1.js";
export type { CandidateDeltaV1 } from "./generated/candidate.delta.v1.js";
export type { ErrorV1 } from "./generated/llmbot.error.v1.js";
