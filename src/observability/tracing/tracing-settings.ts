/** `gateway.tracing` as the config schema gives it (config/observability-schema.ts), which this folder may not import. */
export interface TracingOptions {
  readonly enabled: boolean;
  readonly endpoint?: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName?: string | undefined;
  readonly sampleRatio?: number | undefined;
}

/** What the tracer is built from, once `gateway.tracing` and the OTEL_* variables are merged. */
export interface TracingSettings {
  /** Unset: the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, then its default. */
  readonly endpoint: string | undefined;
  /** Merged by the exporter over OTEL_EXPORTER_OTLP_(TRACES_)HEADERS. */
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
  /** Unset: OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, then parent-based always-on. */
  readonly sampleRatio: number | undefined;
}

/**
 * Whether traces are on, and how: `gateway.tracing.enabled`, or OTEL_TRACES_EXPORTER naming `otlp` (the standard
 * switch); OTEL_SDK_DISABLED=true turns both off, as the specification says it disables the SDK. Undefined: off.
 * Kept apart from the OpenTelemetry code, so that a gateway with tracing off never loads it.
 */
export function tracingSettingsOf(config: TracingOptions, gatewayName: string, env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((name) => name.trim().toLowerCase());
  if (!config.enabled && !exporters.includes('otlp')) return undefined;
  const envName = env.OTEL_SERVICE_NAME?.trim();
  return {
    endpoint: config.endpoint,
    headers: config.headers,
    serviceName: config.serviceName ?? (envName === undefined || envName === '' ? gatewayName : envName),
    sampleRatio: config.sampleRatio,
  };
}
