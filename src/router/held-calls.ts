import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import { asObject, RpcCode, type JsonObject, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { UpstreamReply } from '../upstream/upstream-client.js';
import { REQUIRED_CAPABILITY } from './client-bridge.js';

const NO_INPUTS: ReadonlyMap<string, PendingInput> = new Map();

/**
 * The `_meta` key by which a legacy upstream may name a question it asks mid-call, so that a 2026-07-28 client sees
 * the `inputRequests` key a native tool would use (`user_name` rather than `input-1`). Taken off before the client
 * sees the request.
 */
export const INPUT_KEY_META = 'mcpgate/inputKey';
const INPUT_KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/** Whether a 2026-07-28 client declared anything an upstream could ask it mid-call: if not, nothing is held. */
export function canBeAsked(capabilities: JsonObject): boolean {
  return 'sampling' in capabilities || 'elicitation' in capabilities || 'roots' in capabilities;
}

function missingCapability(method: string): GatewayError {
  const capability = REQUIRED_CAPABILITY[method] ?? method;
  return new GatewayError('MCPGATE_ERR_MISSING_CLIENT_CAPABILITY', `The upstream needs the client's ${capability} capability, which this request did not declare`, {
    data: { requiredCapabilities: { [capability]: {} } },
  });
}

function notSupported(method: string): UpstreamReply {
  return { ok: false, error: { code: RpcCode.MethodNotFound, message: `Client does not support ${method}` } };
}

/**
 * The input hold of a 2026-07-28 call whose client declared none of sampling, elicitation and roots: it can
 * answer nothing, so the call is not held (no hold, no race with the upstream's answer). A question the upstream
 * asks all the same is refused upstream, and the call fails with -32021 once the upstream is done.
 */
export class RefusedInputs {
  failure: GatewayError | undefined;

  get mayAsk(): boolean {
    return this.failure === undefined;
  }

  ask(request: JsonRpcRequest): Promise<UpstreamReply> {
    this.failure ??= missingCapability(request.method);
    return Promise.resolve(notSupported(request.method));
  }
}

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
  private readonly gatherMs: number;
  /** While set, questions are still being gathered: the upstream may be sending several at once. */
  private gathering: NodeJS.Timeout | undefined;
  /** A retry left questions unanswered: the client is asked them again (mrtr.mdx: re-request, not an error). */
  private reask = false;
  /** Answers the first request already carried, by key: a question the upstream then asks is answered at once. */
  private early: JsonObject | undefined;
  /** Set by `abandon`: no client will see what the upstream asks from now on. */
  private abandoned = false;

  constructor(server: string, capabilities: JsonObject, gatherMs: number, early?: unknown) {
    this.server = server;
    this.capabilities = capabilities;
    this.gatherMs = gatherMs;
    this.early = asObject(early);
  }

  get mayAsk(): boolean {
    if (this.failure !== undefined || this.abandoned) return false;
    return this.asked === undefined || this.asked.size === 0 || this.gathering !== undefined;
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
      this.failure ??= missingCapability(request.method);
      this.notify();
      return Promise.resolve(notSupported(request.method));
    }
    const pending = (this.pending ??= new Map());
    const { key, params } = this.keyFor(pending, request.params);
    const given = asObject(this.early?.[key]);
    if (given !== undefined) {
      delete this.early?.[key];
      return Promise.resolve({ ok: true, result: given });
    }
    return new Promise<UpstreamReply>((resolve) => {
      pending.set(key, { method: request.method, params, resolve });
      // A tool that asks several things at once (Promise.all) sends them back to back: one InputRequiredResult
      // should carry them all, so the client is asked after a short gathering window (gateway.mrtr.gatherMs).
      if (this.gathering === undefined && this.gatherMs > 0) {
        this.gathering = setTimeout(() => {
          this.gathering = undefined;
          this.notify();
        }, this.gatherMs);
        this.gathering.unref();
        return;
      }
      this.notify();
    });
  }

  /** The key of a new question: the upstream's own name for it when well formed and unused, else `input-N`. */
  private keyFor(pending: Map<string, PendingInput>, params: JsonObject | undefined): { key: string; params: JsonObject | undefined } {
    const meta = asObject(params?._meta);
    const named = meta?.[INPUT_KEY_META];
    let rest = params;
    if (meta !== undefined && named !== undefined) {
      const others: JsonObject = {};
      for (const [name, value] of Object.entries(meta)) if (name !== INPUT_KEY_META) others[name] = value;
      rest = { ...params };
      if (Object.keys(others).length === 0) delete rest._meta;
      else rest._meta = others;
    }
    if (typeof named === 'string' && INPUT_KEY.test(named) && !pending.has(named)) return { key: named, params: rest };
    let key = `input-${this.nextKey++}`;
    while (pending.has(key)) key = `input-${this.nextKey++}`;
    return { key, params: rest };
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
    this.reask = false;
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
    if (this.asked !== undefined && this.asked.size > 0) this.reask = true;
  }

  /** The client will not answer (the hold expired, the gateway shuts down): the upstream is told so. */
  abandon(reason: string): void {
    this.abandoned = true;
    if (this.gathering !== undefined) clearTimeout(this.gathering);
    this.gathering = undefined;
    for (const input of this.pending?.values() ?? []) input.resolve({ ok: false, error: { code: RpcCode.InternalError, message: reason } });
    this.pending?.clear();
    this.asked?.clear();
  }

  private outcome(): HeldOutcome | undefined {
    if (this.failure !== undefined) return { kind: 'error', error: this.failure };
    if (this.settled !== undefined) return { kind: 'reply', reply: this.settled };
    if (this.pending !== undefined && this.gathering === undefined) {
      if (this.reask) return { kind: 'input' };
      for (const key of this.pending.keys()) if (this.asked?.has(key) !== true) return { kind: 'input' };
    }
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
