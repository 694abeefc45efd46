import type { TracingChannelSubscribers } from 'node:diagnostics_channel';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapGetter, type TextMapSetter, type Tracer } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { JsonRpcResponse } from '../../jsonrpc/message.js';
import type { RequestContext, TraceContext } from '../../pipeline/request-context.js';
import type { StepName } from '../../pipeline/steps.js';
import { requestChannel, stepChannel, type RequestMessage, type StepMessage } from '../../pipeline/tracing.js';
import * as semconv from './semconv.js';

/**
 * The steps that get a span: those that do work a reader of a trace wants to see (issue 26). `resolve`, `admit`
 * and `respond` are bookkeeping between them; `authenticate` runs before the context exists and is drawn from
 * `receivedAt` instead (decision 0020).
 */
const SPANNED: readonly StepName[] = ['authorize', 'ingress', 'upstream', 'egress', 'record'];

/** The W3C trace context and baggage, parsed and written by OpenTelemetry's own propagators. */
const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });

const getter: TextMapGetter<TraceContext> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => (key === 'traceparent' ? carrier.traceparent : key === 'tracestate' ? carrier.tracestate : key === 'baggage' ? carrier.baggage : undefined),
};

type MutableTrace = { traceparent?: string; tracestate?: string; baggage?: string };
const setter: TextMapSetter<MutableTrace> = {
  set: (carrier, key, value) => {
    if (key === 'traceparent' || key === 'tracestate' || key === 'baggage') carrier[key] = value;
  },
};

/** One request's server span, and the trace context its hops carry while no step span is open. */
interface RequestSpans {
  readonly span: Span;
  /** The inbound context (remote parent and baggage) with the server span set: every step span's parent. */
  readonly context: Context;
  readonly trace: TraceContext;
}

/**
 * Node subscribes only the events a handler object has (lib/diagnostics_channel.js), so the events tracing does not
 * use stay unobserved and cost their publisher nothing; @types/node asks for all five.
 */
function only<T extends object>(handlers: Partial<TracingChannelSubscribers<T>>): TracingChannelSubscribers<T> {
  return handlers as TracingChannelSubscribers<T>;
}

/** performance.now() (what the pipeline stamps) as epoch milliseconds, what a span's times are. */
function epochOf(performanceTime: number): number {
  return performance.timeOrigin + performanceTime;
}

/** The trace context `context` puts on the wire: `traceparent` of its span, its `tracestate`, the baggage. */
function wireOf(context: Context): TraceContext {
  const carrier: MutableTrace = {};
  propagator.inject(context, carrier, setter);
  return carrier;
}

/** `{mcp.method.name} {target}` with the tool or prompt as target (MCP conventions, span name). */
function targetOf(context: RequestContext): string | undefined {
  if (context.method !== 'tools/call' && context.method !== 'prompts/get') return undefined;
  const name = context.request.params?.name;
  return typeof name === 'string' ? name : undefined;
}

function serverAttributes(context: RequestContext, target: string | undefined): Attributes {
  const attributes: Attributes = {
    [semconv.ATTR_MCP_METHOD_NAME]: context.method,
    [semconv.ATTR_JSONRPC_REQUEST_ID]: String(context.request.id),
    [semconv.ATTR_MCP_PROTOCOL_VERSION]: context.protocolVersion,
    [semconv.ATTR_NETWORK_TRANSPORT]: context.transport === 'stdio' ? 'pipe' : 'tcp',
  };
  if (context.transport !== 'stdio') attributes[semconv.ATTR_NETWORK_PROTOCOL_NAME] = 'http';
  if (context.session !== undefined) attributes[semconv.ATTR_MCP_SESSION_ID] = context.session.id;
  if (context.clientIp !== undefined) attributes[semconv.ATTR_CLIENT_ADDRESS] = context.clientIp;
  if (target !== undefined) {
    if (context.method === 'tools/call') {
      attributes[semconv.ATTR_GEN_AI_TOOL_NAME] = target;
      attributes[semconv.ATTR_GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_EXECUTE_TOOL;
    } else {
      attributes[semconv.ATTR_GEN_AI_PROMPT_NAME] = target;
    }
  }
  return attributes;
}

/** A gateway error's catalogue code (`MCPGATE_ERR_*`), else the error's class name, else `_OTHER`. */
function errorTypeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : '_OTHER';
}

/**
 * Subscribes the spans of every request to the pipeline's channels (issue 26): a SERVER span per JSON-RPC request
 * (request channel start to final answer), an `authenticate` child drawn from `receivedAt` to the context's
 * creation, and a child per step in {@link SPANNED}. While the `upstream` step runs, `context.trace` is its span's
 * wire context, so every upstream hop names the gateway's upstream span as parent; otherwise the server span's.
 * Returns the unsubscriber. Spans are keyed by the request's context and the step's message, which the channels
 * hand back on every event, in WeakMaps: a request that never ends (a crash mid-step) leaks nothing.
 */
export function subscribeSpans(tracer: Tracer): () => void {
  const requests = new WeakMap<RequestContext, RequestSpans>();
  const steps = new WeakMap<StepMessage, Span>();

  const requestHandlers = {
    start(message: RequestMessage): void {
      const context = message.context;
      const inbound = context.trace;
      // The core already dropped a malformed traceparent: what is left starts a new trace (ROOT) or joins its parent.
      const parent = inbound === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, inbound, getter);
      const target = targetOf(context);
      const startTime = epochOf(context.receivedAt ?? context.startedAt);
      const span = tracer.startSpan(target === undefined ? context.method : `${context.method} ${target}`, { kind: SpanKind.SERVER, startTime, attributes: serverAttributes(context, target) }, parent);
      const spanContext = trace.setSpan(parent, span);
      const own = wireOf(spanContext);
      context.trace = own;
      requests.set(context, { span, context: spanContext, trace: own });
      const observed = context.observed;
      if (observed !== undefined) {
        const ids = span.spanContext();
        observed.traceId = ids.traceId;
        observed.spanId = ids.spanId;
      }
      // Authentication ran at the HTTP edge before this context existed: its span is drawn after the fact. A stdio
      // gateway authenticated its one principal at start, not per request.
      if (context.receivedAt !== undefined && context.transport !== 'stdio') tracer.startSpan('authenticate', { startTime }, spanContext).end(epochOf(context.startedAt));
    },
    asyncEnd(message: RequestMessage): void {
      const spans = requests.get(message.context);
      if (spans === undefined) return;
      requests.delete(message.context);
      endServerSpan(spans.span, message.context, message.response);
    },
  };

  const stepHandlers = {
    start(message: StepMessage): void {
      const spans = requests.get(message.context);
      if (spans === undefined) return;
      const upstream = message.step === 'upstream';
      const span = tracer.startSpan(
        message.step,
        { kind: upstream ? SpanKind.CLIENT : SpanKind.INTERNAL, startTime: epochOf(message.startedAt), attributes: upstream ? { [semconv.ATTR_MCP_METHOD_NAME]: message.context.method } : undefined },
        spans.context,
      );
      steps.set(message, span);
      if (upstream) message.context.trace = wireOf(trace.setSpan(spans.context, span));
    },
    // A step that returned a promise ends at asyncEnd; one that returned anything else, or threw, ends here.
    end(message: StepMessage): void {
      if (message.settles !== true) endStepSpan(message);
    },
    asyncEnd: endStepSpan,
    error(message: StepMessage): void {
      const span = steps.get(message);
      if (span === undefined) return;
      span.setAttribute(semconv.ATTR_ERROR_TYPE, errorTypeOf(message.error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: message.error instanceof Error ? message.error.message : undefined });
    },
  };

  function endStepSpan(message: StepMessage): void {
    const span = steps.get(message);
    if (span === undefined) return;
    steps.delete(message);
    const context = message.context;
    if (message.step === 'upstream') {
      if (context.server !== undefined) span.setAttribute(semconv.ATTR_MCPGATE_SERVER, context.server);
      const spans = requests.get(context);
      if (spans !== undefined) context.trace = spans.trace;
    }
    span.end(epochOf(performance.now()));
  }

  const onRequests = only<RequestMessage>(requestHandlers);
  const onSteps = only<StepMessage>(stepHandlers);
  requestChannel().subscribe(onRequests);
  for (const step of SPANNED) stepChannel(step).subscribe(onSteps);
  return () => {
    requestChannel().unsubscribe(onRequests);
    for (const step of SPANNED) stepChannel(step).unsubscribe(onSteps);
  };
}

/**
 * Ends a server span with how its request ended: a JSON-RPC error sets status ERROR with the gateway's error
 * code (`data.code`, else the JSON-RPC code) as `error.type` and the JSON-RPC code as `rpc.response.status_code`;
 * a tool result with `isError` is `tool_error` (MCP conventions); no answer (cancelled) is `MCPGATE_ERR_CANCELLED`.
 */
function endServerSpan(span: Span, context: RequestContext, response: JsonRpcResponse | undefined): void {
  if (response === undefined) {
    span.setAttribute(semconv.ATTR_ERROR_TYPE, 'MCPGATE_ERR_CANCELLED');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'cancelled by the client' });
  } else if ('error' in response) {
    const data = response.error.data as { code?: unknown } | undefined;
    span.setAttribute(semconv.ATTR_ERROR_TYPE, typeof data?.code === 'string' ? data.code : String(response.error.code));
    span.setAttribute(semconv.ATTR_RPC_RESPONSE_STATUS_CODE, String(response.error.code));
    span.setStatus({ code: SpanStatusCode.ERROR, message: response.error.message });
  } else if (context.method === 'tools/call' && response.result.isError === true) {
    span.setAttribute(semconv.ATTR_ERROR_TYPE, semconv.TOOL_ERROR);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  if (context.server !== undefined) span.setAttribute(semconv.ATTR_MCPGATE_SERVER, context.server);
  span.end(epochOf(performance.now()));
}
