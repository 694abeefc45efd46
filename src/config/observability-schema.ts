import { z } from 'zod';

/**
 * `gateway.metrics` and `gateway.tracing` (issue 26). Both are off unless configured, and cost nothing then: the
 * subscribers in src/observability/ are never attached to the pipeline's channels.
 */

/** Same as schema.ts's `integer`: `${VAR}` interpolation yields strings, so digit strings convert. */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

export const metricsSchema = z.strictObject({
  enabled: z.boolean().default(false),
  /**
   * A listener of its own for `GET /metrics`; unset, it is served on the main listener. A scrape on a
   * non-loopback address (here, or on the main listener when this is unset) must carry `token`.
   */
  listen: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: integer(z.number().int().min(0).max(65_535)),
    })
    .optional(),
  /** The bearer token a scrape must carry, usually `${MCPGATE_METRICS_TOKEN}`; required off loopback. */
  token: z.string().min(16).optional(),
  /** The most label sets all metrics together may hold; past it, new series are dropped and counted. */
  maxSeries: integer(z.number().int().positive().max(1_000_000)).default(10_000),
});

export const tracingSchema = z.strictObject({
  /** On also when OTEL_TRACES_EXPORTER names `otlp` (the standard variable); OTEL_SDK_DISABLED=true turns it off. */
  enabled: z.boolean().default(false),
  /** The OTLP/HTTP traces endpoint (e.g. `http://127.0.0.1:4318/v1/traces`); unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, then the SDK's default. */
  endpoint: z.url({ protocol: /^https?$/ }).optional(),
  /** Extra headers of each export (an API key of the collector); values may be `${ENV}`. */
  headers: z.record(z.string().min(1), z.string()).default({}),
  /** `service.name`; unset: OTEL_SERVICE_NAME, then `gateway.name`. */
  serviceName: z.string().min(1).optional(),
  /**
   * The share of new traces sampled, 0 to 1; a request that arrives with a sampled parent follows its parent.
   * Unset: OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, then 1.
   */
  sampleRatio: z.number().min(0).max(1).optional(),
});

export type MetricsConfig = z.infer<typeof metricsSchema>;
export type TracingConfig = z.infer<typeof tracingSchema>;
