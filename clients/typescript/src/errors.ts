// What the client throws (the Python client's names: docs/contract.md "Clients").
import type { CandidateV1 } from "./generated/candidate.v1.js";
import type { ErrorV1 } from "./generated/llmbot.error.v1.js";

/** Any failure of a client call but a bad event. */
export class ClientError extends Error {}

/** The event is not a valid InternalEventV2 (the service would refuse it): nothing was published. */
export class EventInvalid extends Error {}

/** RabbitMQ is unreachable, or did not confirm the publish in time. */
export class BrokerUnavailable extends ClientError {}

/** The broker refused the event (ingress queue full) or could not route it (no service ran there). */
export class NotDelivered extends ClientError {}

/** No reply within the call's timeout. */
export class ReplyTimeout extends ClientError {}

/** The service gave up on the event: `error` is its ErrorV1. */
export class EventFailed extends ClientError {
  constructor(readonly error: ErrorV1) {
    super(`${error.code}: ${error.message}`);
  }
}

/** A retried model call said something else than the pieces already yielded: show `candidate.text`. */
export class StreamDiverged extends ClientError {
  constructor(readonly candidate: CandidateV1) {
    super("the reply changed after a retried model call; use candidate.text");
  }
}
