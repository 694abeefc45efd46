import { tracingChannel, type TracingChannel } from 'node:diagnostics_channel';
import type { JsonRpcResponse } from '../jsonrpc/message.js';
import type { RequestContext } from './request-context.js';
import { STEPS, type StepName } from './steps.js';

/**
 * What a step's tracing channel publishes (issue 24 §3). Subscribers (metrics, traces, Server-Timing) read the
 * request's fields from `context`; the core never imports them. `error` and `result` are set by
 * diagnostics_channel on the `error` and `asyncEnd` events.
 */
export interface StepMessage {
  readonly step: StepName;
  readonly context: RequestContext;
  /** performance.now() when the step started: every subscriber that times a step needs it, so it is here once. */
  readonly startedAt: number;
  /**
   * Set before `end`: whether the step returned a promise, so that a subscriber knows at `end` whether the step
   * is over (false) or ends at `asyncEnd` (true); unset when it threw before returning.
   */
  settles?: boolean;
  error?: unknown;
  result?: unknown;
}

/** The channel name of a step: `mcpgate:pipeline:<step>` (start, end, asyncStart, asyncEnd, error). */
export function stepChannelName(step: StepName): string {
  return `mcpgate:pipeline:${step}`;
}

const CHANNELS = new Map<StepName, TracingChannel<unknown, StepMessage>>(STEPS.map((step) => [step, tracingChannel<unknown, StepMessage>(stepChannelName(step))]));

/** The tracing channel of `step`, for subscribers. */
export function stepChannel(step: StepName): TracingChannel<unknown, StepMessage> {
  return CHANNELS.get(step) as TracingChannel<unknown, StepMessage>;
}

/** A step's implementation: called as `run(step, context, state)`, so that running it allocates no closure. */
export type StepRun<S, T> = (step: StepName, context: RequestContext, state: S) => T;

/**
 * Runs one step of one request under its tracing channel. With nobody subscribed it is a plain call: no
 * message object and no promise wrapping, so an unobserved gateway pays one map lookup and one property read
 * per step. A step that returns a promise publishes start, end, then asyncStart and asyncEnd once it settles
 * (error before them if it rejects); one that returns anything else publishes start and end (error before end
 * if it throws).
 *
 * The events are published directly rather than through `traceSync`, whose `runStores` wraps every step in two
 * closures and an argument array: with the Server-Timing subscriber always on, that was about 430,000 of the
 * 620,000 instructions the subscriber added per call (callgrind, docs/benchmarks.md). So a store bound to a
 * step's start channel (`bindStore`) is not entered: subscribers read the request from `context`, which every
 * step is handed explicitly, trace context included (decision 0017).
 */
export function traced<S, T>(step: StepName, context: RequestContext, run: StepRun<S, T>, state: S): T {
  const channel = CHANNELS.get(step) as TracingChannel<unknown, StepMessage>;
  if (!channel.hasSubscribers) return run(step, context, state);
  const message: StepMessage = { step, context, startedAt: performance.now() };
  channel.start.publish(message);
  let value: T;
  try {
    value = run(step, context, state);
  } catch (error) {
    message.error = error;
    channel.error.publish(message);
    channel.end.publish(message);
    throw error;
  }
  message.settles = value instanceof Promise;
  channel.end.publish(message);
  if (!(value instanceof Promise)) return value;
  // The synchronous part already published start and end; the settled promise publishes the async events.
  return publishSettled(channel, message, value) as T;
}

function publishSettled<T>(channel: TracingChannel<unknown, StepMessage>, message: StepMessage, promise: Promise<T>): Promise<T> {
  return promise.then(
    (value) => {
      message.result = value;
      channel.asyncStart.publish(message);
      channel.asyncEnd.publish(message);
      return value;
    },
    (error: unknown) => {
      message.error = error;
      channel.error.publish(message);
      channel.asyncStart.publish(message);
      channel.asyncEnd.publish(message);
      throw error;
    },
  );
}

/**
 * What the request channel (`mcpgate:pipeline:request`) publishes: `start` when a JSON-RPC request's context is
 * made (before its first step), `asyncEnd` once its answer is final (shaped for its era), with `response`, or
 * without one when the client cancelled it. Metrics count requests here and tracing opens and closes each
 * request's server span; the steps' own channels come in between.
 */
export interface RequestMessage {
  readonly context: RequestContext;
  response?: JsonRpcResponse | undefined;
}

const REQUEST = tracingChannel<unknown, RequestMessage>('mcpgate:pipeline:request');

/** The request channel, for subscribers. */
export function requestChannel(): TracingChannel<unknown, RequestMessage> {
  return REQUEST;
}

/** Whether anybody listens to requests: a transport allocates what subscribers fill in (ObservedIds) only then. */
export function observingRequests(): boolean {
  return REQUEST.hasSubscribers;
}

/**
 * Whether anybody follows requests from their start, as a tracing subscriber opening a span does (metrics count
 * at the end): a transport allocates ObservedIds, which only such a subscriber fills in, only then.
 */
export function observingRequestStarts(): boolean {
  return REQUEST.start.hasSubscribers;
}

/** Publishes a request's start; undefined (nothing allocated) when nobody listens. */
export function requestStarted(context: RequestContext): RequestMessage | undefined {
  if (!REQUEST.hasSubscribers) return undefined;
  // `response` is there from the start, so that setting it at the end keeps the object's shape.
  const message: RequestMessage = { context, response: undefined };
  REQUEST.start.publish(message);
  return message;
}

/** Publishes a request's end with its final answer (undefined: cancelled, nothing sent). */
export function requestEnded(message: RequestMessage, response: JsonRpcResponse | undefined): void {
  message.response = response;
  REQUEST.asyncEnd.publish(message);
}
