import { isForwardableAuthorization } from '../authn/credentials.js';
import { resourceMetadataUrl } from '../authn/resource-metadata.js';
import type { ServerConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { AccessPolicy } from '../policy/access-policy.js';
import type { Caller } from '../model/caller.js';
import { probeChallenge, type PassthroughProber, type ProbeChallenge, type ProbeTarget } from './probe.js';
import type { PassthroughResourceMetadata, UpstreamMetadataResolver } from './upstream-metadata.js';

/** What the HTTP layer knows about a request when it asks the gate. */
export interface GateRequest {
  readonly caller: Caller | undefined;
  /** Whether the gateway credential came in `X-Mcpgate-Key`: only then may `Authorization` reach an upstream. */
  readonly keyInOwnHeader: boolean;
  readonly upstreamAuthorization: string | undefined;
  /** The gateway's external origin, e.g. `https://gw.example.com`, for the metadata URLs in challenges. */
  readonly origin: string;
}

interface PassthroughServer {
  readonly name: string;
  readonly url: string;
  readonly probe: { readonly enabled: boolean; readonly timeoutMs: number; readonly cacheMs: number };
  readonly metadataUrl: string | undefined;
  readonly allowPrivateMetadata: boolean;
}

export interface PassthroughGateOptions {
  readonly servers: Readonly<Record<string, ServerConfig>>;
  readonly access: AccessPolicy;
  readonly prober: PassthroughProber;
  readonly resolver: UpstreamMetadataResolver;
}

/**
 * Pass-through servers at the HTTP edge (issue 6 §5, DESIGN.md invariant 6): the pre-flight probe that turns an
 * upstream's 401 or 403 into the gateway's own HTTP status before any response byte is written, and the
 * per-server protected-resource metadata a client follows from that 401.
 */
export class PassthroughGate {
  readonly #servers: readonly PassthroughServer[];
  readonly #byName: ReadonlyMap<string, PassthroughServer>;
  readonly #access: AccessPolicy;
  readonly #prober: PassthroughProber;
  readonly #resolver: UpstreamMetadataResolver;

  constructor(options: PassthroughGateOptions) {
    const servers: PassthroughServer[] = [];
    for (const [name, server] of Object.entries(options.servers)) {
      if (server.transport === 'stdio' || server.credentials?.mode !== 'passthrough' || !server.enabled) continue;
      const { probe, metadataUrl, allowPrivateMetadata } = server.credentials;
      servers.push({ name, url: server.url, probe, metadataUrl, allowPrivateMetadata });
    }
    this.#servers = servers;
    this.#byName = new Map(servers.map((server) => [server.name, server]));
    this.#access = options.access;
    this.#prober = options.prober;
    this.#resolver = options.resolver;
  }

  /** Whether any server is configured for pass-through; without one the gate is never asked. */
  get active(): boolean {
    return this.#servers.length > 0;
  }

  /**
   * Probes, concurrently, the pass-through servers this caller may use, and returns the refusal to send instead
   * of the response, or undefined to proceed. Only a key presented in `X-Mcpgate-Key` makes a probe: with the
   * key in `Authorization` nothing can be forwarded, so an upstream 401 would be a challenge the client cannot
   * answer. An unreachable upstream fails open (the prober logs it).
   */
  async check(request: GateRequest): Promise<ProbeChallenge | undefined> {
    if (!request.keyInOwnHeader || this.#servers.length === 0) return undefined;
    // Authorization before contact (DESIGN.md invariant 3): a server the caller may not use is never probed.
    const decision = await this.#access.decide(request.caller);
    const targets: ProbeTarget[] = [];
    for (const server of this.#servers) {
      if (!server.probe.enabled || !decision.allowsServer(server.name)) continue;
      targets.push({ server: server.name, url: server.url, timeoutMs: server.probe.timeoutMs, cacheMs: server.probe.cacheMs });
    }
    if (targets.length === 0) return undefined;
    const authorization = request.upstreamAuthorization;
    // The probe is a request to the upstream like any other: the same egress check as the broker's (issue 22 A1).
    if (authorization !== undefined && !isForwardableAuthorization(authorization)) {
      throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'the Authorization for pass-through servers must be exactly "Bearer <token>"');
    }
    const outcomes = await this.#prober.probe(targets, authorization);
    return probeChallenge(outcomes, (server) => this.metadataUrl(request.origin, server));
  }

  /** The gateway's RFC 9728 metadata URL for one pass-through server. */
  metadataUrl(origin: string, server: string): string {
    return resourceMetadataUrl(`${origin}/${server}/mcp`);
  }

  /**
   * The document served at `/.well-known/oauth-protected-resource/<server>/mcp`, naming the upstream's own
   * authorization servers; undefined for a name that is not a pass-through server.
   */
  async metadata(origin: string, server: string): Promise<PassthroughResourceMetadata | undefined> {
    const entry = this.#byName.get(server);
    if (entry === undefined) return undefined;
    return this.#resolver.metadataFor(
      { name: entry.name, url: entry.url, allowPrivateMetadata: entry.allowPrivateMetadata, ...(entry.metadataUrl === undefined ? {} : { metadataUrl: entry.metadataUrl }) },
      `${origin}/${server}/mcp`,
    );
  }

  close(): Promise<void> {
    return this.#resolver.close();
  }
}
