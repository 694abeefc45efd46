import { GatewayError } from '../errors/gateway-error.js';
import { asObject, type JsonObject } from '../jsonrpc/message.js';
import type { RequestContext } from '../pipeline/request-context.js';
import { forwardToClient } from './client-bridge.js';

/** The server→client requests an `InputRequiredResult` may carry (basic/patterns/mrtr §core types). */
const INPUT_METHODS: ReadonlySet<string> = new Set(['elicitation/create', 'sampling/createMessage', 'roots/list']);

/**
 * A retry's `inputResponses`: an object whose members are results (objects), within the size bound. Keys the
 * upstream did not ask for are left for it to ignore, as the specification says servers do; a gateway that
 * dropped them would have to know what the upstream asked, which a stateless retry does not tell it.
 */
export function checkInputResponses(value: unknown, maxBytes: number): void {
  const responses = asObject(value);
  if (responses === undefined) throw refused('inputResponses must be an object');
  for (const [key, entry] of Object.entries(responses)) {
    if (asObject(entry) === undefined) throw refused(`inputResponses.${key} must be an object (a client result)`);
  }
  if (Buffer.byteLength(JSON.stringify(responses)) > maxBytes) {
    throw refused(`inputResponses is larger than ${maxBytes} bytes (gateway.mrtr.maxInputResponsesBytes)`);
  }
}

/**
 * Asks a legacy client, over its session, what a 2026-07-28 upstream's `inputRequests` ask (issue 25 §11): each
 * as the server→client request the legacy era has, only those the client declared (the bridge refuses the rest),
 * in turn. An unanswered one is left out: the upstream asks again or fails, and the round cap ends a loop.
 */
export async function answerInputRequests(context: RequestContext, inputRequests: unknown): Promise<JsonObject> {
  const session = context.session;
  const requests = asObject(inputRequests) ?? {};
  const answers: JsonObject = {};
  if (session === undefined) return answers;
  const controller = new AbortController();
  const unsubscribe = context.signal.subscribe(() => controller.abort());
  try {
    for (const [key, value] of Object.entries(requests)) {
      const request = asObject(value);
      const method = request?.method;
      if (typeof method !== 'string' || !INPUT_METHODS.has(method)) continue;
      const params = asObject(request?.params);
      const reply = await forwardToClient(session, context.stream, { jsonrpc: '2.0', id: 0, method, ...(params === undefined ? {} : { params }) }, controller.signal);
      if (reply.ok) answers[key] = reply.result;
    }
  } finally {
    unsubscribe();
  }
  return answers;
}

function refused(message: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_INPUT_RESPONSES', `Invalid params: ${message}`);
}
