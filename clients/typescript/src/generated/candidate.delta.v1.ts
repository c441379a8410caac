// Generated from schemas/candidate.delta.v1.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

export type Schema = "candidate.delta.v1";
/**
 * The id of the CandidateV1 this delta belongs to.
 */
export type CandidateId = string;
export type EventId = string;
/**
 * 0, 1, 2, ... within one model call; a retried call after a failure midway starts again at 0 (its text replaces the earlier attempt's).
 */
export type Seq = number;
/**
 * The next piece of the reply's text.
 */
export type Delta = string;

/**
 * A piece of a reply being streamed, published to the event's AMQP ``reply_to`` (best
 * effort, not persisted): the final CandidateV1 follows and is the truth.
 */
export interface CandidateDeltaV1 {
  schema?: Schema;
  candidate_id: CandidateId;
  event_id: EventId;
  seq: Seq;
  delta: Delta;
}
