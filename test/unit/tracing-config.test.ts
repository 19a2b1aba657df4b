/**
 * Tracing is configured as every OpenTelemetry user configures it: the OTEL_* variables, mirrored
 * by a `tracing` section they win over. Bad values are errors naming the variable or key; no
 * endpoint means off, and off builds nothing.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createTracing } from '../../src/platform/trace/setup.js';
import { sampled, sampledRoot, shownUrl, traceSettings } from '../../src/platform/trace/settings.js';
import { NO_TRACING } from '../../src/platform/trace/tracing.js';

function withFile(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-tracing-'));
  const file = join(dir, 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

const settingsOf = (env: Record<string, string>, yaml?: string) =>
  traceSettings(loadConfig({ env, ...(yaml === undefined ? {} : { file: withFile(yaml) }) }).tracing);

describe('tracing settings', () => {
  it('are off without an endpoint', () => {
    expect(settingsOf({})).toBeUndefined();
  });

  it("follow OpenTelemetry's variables: /v1/traces under the base endpoint, the traces endpoint as it is", () => {
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      url: 'http://collector:4318/v1/traces',
      serviceName: 'etagere',
      sampler: 'parentbased_always_on',
      ratio: 1,
      resource: {},
    });
    expect(settingsOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otel.example/custom/path' })?.url).toBe(
      'https://otel.example/custom/path',
    );
    const all = settingsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_SERVICE_NAME: 'proxy-eu',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,team=api%20platform',
    });
    expect(all).toMatchObject({
      serviceName: 'proxy-eu',
      sampler: 'traceidratio',
      ratio: 0.01,
      resource: { 'deployment.environment.name': 'prod', team: 'api platform' },
    });
  });

  it('take the tracing section, and the environment wins over it', () => {
    const yaml = [
      'tracing:',
      '  endpoint: http://from-file:4318',
      '  service_name: from-file',
      '  sampler: always_off',
      '  resource_attributes: { team: file, region: eu }',
    ].join('\n');
    expect(settingsOf({}, yaml)).toMatchObject({ url: 'http://from-file:4318/v1/traces', serviceName: 'from-file', sampler: 'always_off' });
    const overridden = settingsOf(
      {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://from-env:4318/v1/traces',
        OTEL_TRACES_SAMPLER: 'always_on',
        OTEL_RESOURCE_ATTRIBUTES: 'team=env',
      },
      yaml,
    );
    // An endpoint variable replaces both endpoint keys; attributes merge, the variable's winning.
    expect(overridden).toMatchObject({
      url: 'http://from-env:4318/v1/traces',
      sampler: 'always_on',
      resource: { team: 'env', region: 'eu' },
    });
  });

  it('take service.name from the resource attributes when no service name is given', () => {
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_RESOURCE_ATTRIBUTES: 'service.name=edge' })?.serviceName).toBe(
      'edge',
    );
  });

  it.each([
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER: .*\(tracing\.sampler\)/],
    [{ OTEL_TRACES_SAMPLER_ARG: '1.5' }, /OTEL_TRACES_SAMPLER_ARG: must be a ratio from 0 to 1 \(tracing\.sampler_arg\)/],
    [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, /OTEL_TRACES_SAMPLER_ARG: .*\(tracing\.sampler_arg\)/],
    [{ OTEL_TRACES_SAMPLER_ARG: '-0.1' }, /OTEL_TRACES_SAMPLER_ARG: .*\(tracing\.sampler_arg\)/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT: .*\(tracing\.endpoint\)/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'file:///etc/passwd' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: .*\(tracing\.traces_endpoint\)/],
    [{ OTEL_RESOURCE_ATTRIBUTES: 'team' }, /^OTEL_RESOURCE_ATTRIBUTES entry 1: must be key=value/],
    [{ OTEL_RESOURCE_ATTRIBUTES: 'a=1,team=%E0%A4%A' }, /^OTEL_RESOURCE_ATTRIBUTES entry 2: the value is not validly percent-encoded/],
    [{ OTEL_RESOURCE_ATTRIBUTES: 'bad key=1' }, /tracing\.resource_attributes/],
  ])('refuse %o with an error naming it', (env, message) => {
    expect(() => loadConfig({ env })).toThrow(ConfigError);
    expect(() => loadConfig({ env })).toThrow(message);
  });

  it('refuse a bad sampler in the file, naming the key', () => {
    expect(() => loadConfig({ env: {}, file: withFile('tracing:\n  sampler: random\n') })).toThrow(/tracing\.sampler: /);
  });

  it('never log the password or query values of an endpoint URL: masked as check-config masks them', () => {
    expect(shownUrl('https://user:secret@otel.example/v1/traces')).toBe('https://user:***@otel.example/v1/traces');
    expect(shownUrl('https://otel.example/v1/traces?api-key=secret&x=1')).toBe('https://otel.example/v1/traces?api-key=***&x=***');
  });

  it('put the signal path onto the endpoint path, before its query', () => {
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example/?api-key=secret' })?.url).toBe(
      'https://otel.example/v1/traces?api-key=secret',
    );
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example/otlp//?api-key=s&t=1' })?.url).toBe(
      'https://otel.example/otlp/v1/traces?api-key=s&t=1',
    );
  });

  it("log the start-up line with the endpoint's query masked", async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
    const tracing = await createTracing(
      loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9/?api-key=hunter2secret' } }).tracing,
      logger,
    );
    await tracing.shutdown();
    expect(lines.join('')).toContain('v1/traces?api-key=***');
    expect(lines.join('')).not.toContain('hunter2secret');
  });

  it('log the start-up line with one service key, and the service name under service_name', async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9/', OTEL_SERVICE_NAME: 'edge-cache' };
    const tracing = await createTracing(loadConfig({ env }).tracing, logger);
    await tracing.shutdown();
    const line = lines.find((text) => text.includes('tracing on'))!;
    expect(line.match(/"service":/g)).toHaveLength(1);
    expect(JSON.parse(line)).toMatchObject({ service: 'etagere', service_name: 'edge-cache' });
  });

  it('build no SDK when off', async () => {
    const tracing = await createTracing(loadConfig({ env: {} }).tracing, createLogger({ level: 'silent' }));
    expect(tracing).toBe(NO_TRACING);
    expect(tracing.on).toBe(false);
  });
});

describe('the sampling decision', () => {
  const ids = Array.from({ length: 100_000 }, () => randomBytes(16).toString('hex'));

  it('follows a parent under parentbased_*, and the root sampler without one', () => {
    expect(sampled('parentbased_always_on', 1, ids[0]!, { sampled: false })).toBe(false);
    expect(sampled('parentbased_always_off', 1, ids[0]!, { sampled: true })).toBe(true);
    expect(sampled('parentbased_always_on', 1, ids[0]!, undefined)).toBe(true);
    expect(sampled('parentbased_always_off', 1, ids[0]!, undefined)).toBe(false);
    // Not parent-based: the client's flag does not decide.
    expect(sampled('always_on', 1, ids[0]!, { sampled: false })).toBe(true);
    expect(sampled('always_off', 1, ids[0]!, { sampled: true })).toBe(false);
  });

  it('starts about the ratio of root traces (no client context) under traceidratio and parentbased_traceidratio', () => {
    const draws = ids.map((id) => parseInt(id.slice(0, 8), 16) / 0x1_0000_0000);
    for (const sampler of ['traceidratio', 'parentbased_traceidratio'] as const) {
      const kept = draws.filter((draw) => sampledRoot(sampler, 0.01, draw)).length;
      expect(kept).toBeGreaterThan(500);
      expect(kept).toBeLessThan(1500);
    }
    expect(sampledRoot('parentbased_always_on', 0, 0.5)).toBe(true);
    expect(sampledRoot('always_off', 1, 0)).toBe(false);
  });

  it('keeps about the ratio of trace ids under traceidratio, the same decision for the same id', () => {
    const kept = ids.filter((id) => sampled('traceidratio', 0.01, id, undefined)).length;
    expect(kept).toBeGreaterThan(500);
    expect(kept).toBeLessThan(1500);
    expect(
      ids.every((id) => sampled('traceidratio', 0.01, id, undefined) === sampled('parentbased_traceidratio', 0.01, id, undefined)),
    ).toBe(true);
    expect(ids.some((id) => sampled('traceidratio', 0, id, undefined))).toBe(false);
    expect(ids.every((id) => sampled('traceidratio', 1, id, undefined))).toBe(true);
  });
});
