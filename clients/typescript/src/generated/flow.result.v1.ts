// Generated from schemas/flow.result.v1.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

export type Schema = "flow.result.v1";
export type Id = string;
export type Flow = string;
export type TenantId = string;
export type UserId = string;
export type ConversationId = string;
export type Status = "completed" | "exited" | "expired";
/**
 * The question's id; a follow-up's is ``<question id>.follow_up_<n>``.
 */
export type QuestionId = string;
/**
 * The answer as its type reads it (scale: integer, boolean, choice: the option, text: the text); null when it was never given (retries used up, or the flow ended first).
 */
export type Value = number | boolean | string | null;
/**
 * What the user last wrote for it (null: not asked).
 */
export type Raw = string | null;
/**
 * How many replies it took (0: not asked).
 */
export type Attempts = number;
export type Answers = FlowAnswer[];
export type StartedAt = string;
export type FinishedAt = string;

/**
 * The answers of a flow (SPEC 5.10), published to ``internal.flow.result.v1`` once the
 * flow completed, was exited or expired. ``id`` is stable: a republish carries the same.
 */
export interface FlowResultV1 {
  schema?: Schema;
  id: Id;
  flow: Flow;
  tenant_id: TenantId;
  user_id: UserId;
  conversation_id: ConversationId;
  status: Status;
  answers: Answers;
  started_at: StartedAt;
  finished_at: FinishedAt;
}
/**
 * One question's answer in a flow's result.
 */
export interface FlowAnswer {
  question_id: QuestionId;
  value: Value;
  raw: Raw;
  attempts: Attempts;
}
