import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { tracingSettingsOf } from '../../src/observability/tracing/tracing-settings.js';
import { traceContextOf, traceContextOfMeta } from '../../src/pipeline/trace-context.js';
import { withLegacyMeta, withModernMeta } from '../../src/upstream/modern-era.js';

/** Issue 26: when traces are on, and which inbound trace context may be forwarded at all (tracing on or off). */

const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const OFF = { enabled: false, headers: {} };

describe('tracingSettingsOf: gateway.tracing and the OTEL_* variables', () => {
  it('is off by default, and with only an endpoint variable', () => {
    assert.equal(tracingSettingsOf(OFF, 'mcpgate', {}), undefined);
    assert.equal(tracingSettingsOf(OFF, 'mcpgate', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }), undefined);
    assert.equal(tracingSettingsOf(OFF, 'mcpgate', { OTEL_TRACES_EXPORTER: 'none' }), undefined);
  });

  it('is on with enabled, or OTEL_TRACES_EXPORTER naming otlp; OTEL_SDK_DISABLED=true wins over both', () => {
    assert.ok(tracingSettingsOf({ ...OFF, enabled: true }, 'mcpgate', {}));
    assert.ok(tracingSettingsOf(OFF, 'mcpgate', { OTEL_TRACES_EXPORTER: 'console, OTLP' }));
    assert.equal(tracingSettingsOf({ ...OFF, enabled: true }, 'mcpgate', { OTEL_SDK_DISABLED: 'TRUE' }), undefined);
    assert.equal(tracingSettingsOf(OFF, 'mcpgate', { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }), undefined);
    assert.ok(tracingSettingsOf({ ...OFF, enabled: true }, 'mcpgate', { OTEL_SDK_DISABLED: 'false' }));
  });

  it('service.name: the config, else OTEL_SERVICE_NAME, else gateway.name; the rest from the config as given', () => {
    const on = { ...OFF, enabled: true };
    assert.equal(tracingSettingsOf(on, 'edge', {})?.serviceName, 'edge');
    assert.equal(tracingSettingsOf(on, 'edge', { OTEL_SERVICE_NAME: 'from-env' })?.serviceName, 'from-env');
    const settings = tracingSettingsOf({ ...on, serviceName: 'own', endpoint: 'http://collector:4318/v1/traces', headers: { 'x-api-key': 'k' }, sampleRatio: 0.25 }, 'edge', { OTEL_SERVICE_NAME: 'from-env' });
    assert.deepEqual(settings, { serviceName: 'own', endpoint: 'http://collector:4318/v1/traces', headers: { 'x-api-key': 'k' }, sampleRatio: 0.25 });
  });
});

describe('traceContextOf: what may be forwarded upstream', () => {
  it('keeps a valid context as it came (blanks around the traceparent trimmed)', () => {
    assert.deepEqual(traceContextOf(` ${VALID} `, 'rojo=00f067aa0ba902b7', 'tenant=acme'), { traceparent: VALID, tracestate: 'rojo=00f067aa0ba902b7', baggage: 'tenant=acme' });
  });

  it('drops it all for a malformed traceparent, whatever came with it', () => {
    for (const bad of [undefined, 42, '', 'garbage', VALID.toUpperCase(), VALID.replace('00f067aa0ba902b7', '0'.repeat(16)), `01${VALID.slice(2)}`, `${VALID}\r\nx: 1`, `${VALID}-extra`]) {
      assert.equal(traceContextOf(bad, 'rojo=1', 'tenant=acme'), undefined, String(bad));
    }
  });

  it('drops a baggage over 180 members or 8192 bytes, or with bytes no header may carry; keeps one at the limits', () => {
    const members = (count: number): string => Array.from({ length: count }, (_, index) => `k${index}=v`).join(',');
    assert.equal(traceContextOf(VALID, undefined, members(180))?.baggage, members(180));
    assert.equal(traceContextOf(VALID, undefined, members(181))?.baggage, undefined);
    const atLimit = `k=${'x'.repeat(8190)}`;
    assert.equal(traceContextOf(VALID, undefined, atLimit)?.baggage, atLimit);
    assert.equal(traceContextOf(VALID, undefined, `${atLimit}x`)?.baggage, undefined);
    assert.equal(traceContextOf(VALID, undefined, 'k=v\r\nx: 1')?.baggage, undefined);
    assert.equal(traceContextOf(VALID, 'k=v\nx', undefined)?.tracestate, undefined);
    assert.equal(traceContextOf(VALID, undefined, members(181))?.traceparent, VALID, 'the traceparent stays');
  });

  it('reads _meta (SEP-414): none without a traceparent key', () => {
    assert.equal(traceContextOfMeta(undefined), undefined);
    assert.equal(traceContextOfMeta({ progressToken: 1 }), undefined);
    assert.deepEqual(traceContextOfMeta({ traceparent: VALID, baggage: 'a=b' }), { traceparent: VALID, tracestate: undefined, baggage: 'a=b' });
  });
});

describe('a caller’s own _meta trace keys never go upstream as written', () => {
  it('legacy: replaced by the hop’s, or dropped when the hop has none', () => {
    const params = { name: 'tool', _meta: { traceparent: 'garbage', baggage: 'x', vendor: 1 } };
    assert.deepEqual(withLegacyMeta(params, undefined), { name: 'tool', _meta: { vendor: 1 } });
    assert.deepEqual(withLegacyMeta(params, { traceparent: VALID }), { name: 'tool', _meta: { vendor: 1, traceparent: VALID } });
  });

  it('legacy: a _meta of hop fields alone leaves no _meta on the wire, and the caller’s params are not changed', () => {
    const params = { name: 'tool', arguments: { a: 1 }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', traceparent: 'garbage' } };
    const before = JSON.stringify(params);
    assert.equal(JSON.stringify(withLegacyMeta(params, undefined)), '{"name":"tool","arguments":{"a":1}}');
    assert.equal(JSON.stringify(params), before);
  });

  it('modern: the hop’s meta only', () => {
    const out = withModernMeta({ _meta: { traceparent: 'garbage', tracestate: 'bad', vendor: 1 } }, {}, {}, '2026-07-28');
    assert.deepEqual(out._meta, { vendor: 1, 'io.modelcontextprotocol/protocolVersion': '2026-07-28' });
  });
});
