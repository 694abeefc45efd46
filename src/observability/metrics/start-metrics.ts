import type { Logger } from '../logger.js';
import { CallHistory } from './call-history.js';
import { GatewayMetrics } from './gateway-metrics.js';
import { MetricsEndpoint, MetricsListener } from './metrics-endpoint.js';
import type { MetricsSources } from './scrape-gauges.js';

/** `gateway.metrics` (config/observability-schema.ts), as far as starting them goes. */
export interface MetricsSettings {
  readonly maxSeries: number;
  readonly token?: string | undefined;
  readonly listen?: { readonly host: string; readonly port: number } | undefined;
}

export interface MetricsDeps {
  readonly servers: readonly string[];
  readonly sources: MetricsSources;
  readonly logger: Logger;
}

export interface RunningMetrics {
  /** What the main listener serves at `/metrics`; undefined when `listen` gives the metrics a listener of their own. */
  readonly endpoint: MetricsEndpoint | undefined;
  /** Calls and latency per server over the last minutes, for the admin UI's overview (issue 28). */
  readonly history: CallHistory;
  /** Detaches the subscribers, stops the history's timer and closes the metrics' own listener, if any. */
  close(): Promise<void>;
}

/**
 * Turns metrics on (`gateway.metrics.enabled`): subscribes to the pipeline's channels, starts the call history
 * and, with `listen`, opens the metrics' own listener. The composition root imports this module only then, so a gateway without metrics never
 * loads prom-client. Whether a token is needed off loopback is the config's check (schema.ts) and the root's.
 */
export async function startMetrics(config: MetricsSettings, deps: MetricsDeps): Promise<RunningMetrics> {
  const { logger } = deps;
  const metrics = new GatewayMetrics({ maxSeries: config.maxSeries, servers: deps.servers, sources: deps.sources });
  const endpoint = new MetricsEndpoint({ metrics, token: config.token, logger });
  const guarded = config.token === undefined ? 'no token: loopback only' : 'a scrape must carry the bearer token of gateway.metrics.token';
  const history = new CallHistory({ totals: () => metrics.callTotals(), bounds: metrics.latencyBounds });
  metrics.subscribe();
  history.start();
  const stop = (): void => {
    history.stop();
    metrics.unsubscribe();
  };
  if (config.listen === undefined) {
    logger.info({ maxSeries: config.maxSeries, token: config.token !== undefined }, `metrics served at /metrics on the main listener (${guarded})`);
    return { endpoint, history, close: () => Promise.resolve(stop()) };
  }
  const listener = new MetricsListener(endpoint, logger);
  try {
    const url = await listener.listen(config.listen.host, config.listen.port);
    logger.info({ url, maxSeries: config.maxSeries, token: config.token !== undefined }, `metrics served at ${url} (${guarded})`);
  } catch (error) {
    stop();
    throw error;
  }
  return {
    endpoint: undefined,
    history,
    async close() {
      stop();
      await listener.close();
    },
  };
}
