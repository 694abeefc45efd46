import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import { asObject, RpcCode, type JsonObject, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { UpstreamReply } from '../upstream/upstream-client.js';
import { REQUIRED_CAPABILITY } from './client-bridge.js';

const NO_INPUTS: ReadonlyMap<string, PendingInput> = new Map();

/** How a held call's wait ended: the upstream answered, it asked the client something, or the call failed. */
export type HeldOutcome = { readonly kind: 'reply'; readonly reply: UpstreamReply } | { readonly kind: 'input' } | { readonly kind: 'error'; readonly error: unknown };

interface PendingInput {
  readonly method: string;
  readonly params: JsonObject | undefined;
  readonly resolve: (reply: UpstreamReply) => void;
}

/**
 * One legacy upstream call made for a 2026-07-28 client, held open while the client answers what the upstream
 * asked it mid-call (issue 25 §11, modern client and legacy upstream). The upstream's server→client requests
 * become the `inputRequests` of an `InputRequiredResult`; the client's retry, whose sealed state names this
 * call, answers them, and the upstream's eventual answer is the retry's result.
 */
export class HeldCall {
  /** 128 random bits, drawn when the call is first held: the sealed state names it, and a guess opens nothing. */
  id = '';
  readonly server: string;
  private readonly capabilities: JsonObject;
  private pending: Map<string, PendingInput> | undefined;
  /** Keys already handed to the client in an `InputRequiredResult` and not yet answered; made on the first one. */
  private asked: Set<string> | undefined;
  private nextKey = 1;
  private settled: UpstreamReply | undefined;
  private failure: unknown;
  private waiter: ((outcome: HeldOutcome) => void) | undefined;

  constructor(server: string, capabilities: JsonObject) {
    this.server = server;
    this.capabilities = capabilities;
  }

  /** Follows the upstream exchange: its answer (or failure) ends the call. */
  start(upstream: Promise<UpstreamReply>): void {
    upstream.then(
      (reply) => {
        this.settled = reply;
        this.notify();
      },
      (error: unknown) => {
        this.failure ??= error;
        this.notify();
      },
    );
  }

  /**
   * The upstream asks the client something. A request the client's capabilities do not cover fails the call with
   * -32021 (basic/index §per-request fields) and the upstream is told the client cannot; otherwise it waits for
   * the client's retry.
   */
  ask(request: JsonRpcRequest): Promise<UpstreamReply> {
    const capability = REQUIRED_CAPABILITY[request.method];
    if (capability === undefined || !(capability in this.capabilities)) {
      this.failure ??= new GatewayError('MCPGATE_ERR_MISSING_CLIENT_CAPABILITY', `The upstream needs the client's ${capability ?? request.method} capability, which this request did not declare`, {
        data: { requiredCapabilities: { [capability ?? request.method]: {} } },
      });
      this.notify();
      return Promise.resolve({ ok: false, error: { code: RpcCode.MethodNotFound, message: `Client does not support ${request.method}` } });
    }
    return new Promise<UpstreamReply>((resolve) => {
      (this.pending ??= new Map()).set(`input-${this.nextKey++}`, { method: request.method, params: request.params, resolve });
      this.notify();
    });
  }

  /** Waits until the upstream answers, asks something not yet asked, or the call fails. */
  next(): Promise<HeldOutcome> {
    const now = this.outcome();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** The questions to put to the client now: every unanswered one, which it has now been asked. */
  inputRequests(): JsonObject {
    const requests: JsonObject = {};
    for (const [key, input] of this.pending ?? NO_INPUTS) {
      requests[key] = input.params === undefined ? { method: input.method } : { method: input.method, params: input.params };
      (this.asked ??= new Set()).add(key);
    }
    return requests;
  }

  /** A retry's answers: each goes to the upstream request it names; keys the call never asked are ignored. */
  answer(responses: unknown): void {
    const answers = asObject(responses);
    if (answers === undefined) return;
    for (const [key, value] of Object.entries(answers)) {
      const input = this.pending?.get(key);
      const result = asObject(value);
      if (input === undefined || result === undefined) continue;
      this.pending?.delete(key);
      this.asked?.delete(key);
      input.resolve({ ok: true, result });
    }
  }

  /** The client will not answer (the hold expired, the gateway shuts down): the upstream is told so. */
  abandon(reason: string): void {
    for (const input of this.pending?.values() ?? []) input.resolve({ ok: false, error: { code: RpcCode.InternalError, message: reason } });
    this.pending?.clear();
    this.asked?.clear();
  }

  private outcome(): HeldOutcome | undefined {
    if (this.failure !== undefined) return { kind: 'error', error: this.failure };
    if (this.settled !== undefined) return { kind: 'reply', reply: this.settled };
    if (this.pending !== undefined) for (const key of this.pending.keys()) if (this.asked?.has(key) !== true) return { kind: 'input' };
    return undefined;
  }

  private notify(): void {
    const waiter = this.waiter;
    if (waiter === undefined) return;
    const outcome = this.outcome();
    if (outcome === undefined) return;
    this.waiter = undefined;
    waiter(outcome);
  }
}

/**
 * The held calls of this replica, waiting for their clients' retries: bounded in number and in time. A retry
 * takes its call out (so two retries with one state cannot both answer it); an expired hold abandons its call.
 */
export class HeldCalls {
  /** This process's name in sealed states: a retry that lands on another replica is told where its call is. */
  readonly replica = randomBytes(8).toString('base64url');
  private readonly calls = new Map<string, { call: HeldCall; timer: NodeJS.Timeout }>();
  private readonly holdMs: number;
  private readonly max: number;

  constructor(holdMs: number, max: number) {
    this.holdMs = holdMs;
    this.max = max;
  }

  /** Keeps a call until its client retries or `holdMs` passes; throws when this replica holds `max` already. */
  park(call: HeldCall): void {
    if (this.calls.size >= this.max && !this.calls.has(call.id)) {
      call.abandon('the gateway holds too many calls waiting for client input');
      throw new GatewayError('MCPGATE_ERR_UPSTREAM_BUSY', `The gateway already holds ${this.max} calls waiting for client input; try again later`, {
        data: { server: call.server, retryAfterMs: 1_000 },
      });
    }
    if (call.id === '') call.id = randomBytes(16).toString('base64url');
    const timer = setTimeout(() => {
      this.calls.delete(call.id);
      call.abandon('the client did not answer in time (gateway.mrtr.holdMs)');
    }, this.holdMs);
    timer.unref();
    this.calls.set(call.id, { call, timer });
  }

  /** The call a retry names, taken out; undefined when this replica does not hold it (any more). */
  take(id: string): HeldCall | undefined {
    const entry = this.calls.get(id);
    if (entry === undefined) return undefined;
    clearTimeout(entry.timer);
    this.calls.delete(id);
    return entry.call;
  }

  get size(): number {
    return this.calls.size;
  }

  closeAll(): void {
    for (const { call, timer } of this.calls.values()) {
      clearTimeout(timer);
      call.abandon('the gateway is shutting down');
    }
    this.calls.clear();
  }
}
