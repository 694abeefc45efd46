import { diag, trace, type DiagLogger } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import type { Logger } from '../logger.js';
import { subscribeSpans } from './span-subscriber.js';
import type { TracingSettings } from './tracing-settings.js';

/** A running tracer: `shutdown` stops the spans, then flushes what is batched and stops the exporter. */
export interface RunningTracing {
  shutdown(): Promise<void>;
}

/** The instrumentation scope of every span the gateway makes. */
const SCOPE = 'mcpgate';

/**
 * Starts OpenTelemetry traces (issue 26): the Node SDK with no instrumentations, the OTLP/HTTP (JSON) trace
 * exporter behind a BatchSpanProcessor, and the gateway's spans subscribed to the pipeline's channels. The SDK is
 * given empty metric readers and log processors, so that its defaults (an OTLP metrics exporter when
 * OTEL_METRICS_EXPORTER is unset) do not start anything but traces; and no global propagator, since the gateway
 * propagates by its own rules (decision 0020). The SDK's diagnostics go to the gateway's logger at warn.
 */
export function startTracing(settings: TracingSettings, logger: Logger): RunningTracing {
  diag.setLogger(diagLogger(logger));
  const exporter = new OTLPTraceExporter({ url: settings.endpoint, headers: { ...settings.headers } });
  const sdk = new NodeSDK({
    serviceName: settings.serviceName,
    spanProcessors: [new BatchSpanProcessor(exporter)],
    ...(settings.sampleRatio === undefined ? {} : { sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }) }),
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
    textMapPropagator: null,
  });
  sdk.start();
  const unsubscribe = subscribeSpans(trace.getTracer(SCOPE));
  logger.info({ endpoint: settings.endpoint ?? 'OTEL_EXPORTER_OTLP_* or the default', serviceName: settings.serviceName, sampleRatio: settings.sampleRatio }, 'tracing on');
  let stopping: Promise<void> | undefined;
  return {
    shutdown() {
      stopping ??= (async () => {
        unsubscribe();
        await sdk.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'tracing shutdown failed: spans may be lost'));
        diag.disable();
      })();
      return stopping;
    },
  };
}

function diagLogger(logger: Logger): DiagLogger {
  const log = (level: 'warn' | 'error') => (message: string, ...args: unknown[]): void => logger[level]({ otel: args.length === 0 ? undefined : args.map(String) }, message);
  const quiet = (): void => undefined;
  return { error: log('error'), warn: log('warn'), info: quiet, debug: quiet, verbose: quiet };
}
