/**
 * Traces from the built CLI with workers: configured by OpenTelemetry's variables alone, each
 * worker process exports its own spans, and what is queued is exported when it shuts down.
 */
import { get as httpGet } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, serveCli } from '../helpers/cli.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { until } from '../helpers/proxy.js';
import { startJsonUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const TRACE = '8bf7651916cd43dd8448eb211c80319c';

let otlp: OtlpReceiver;
let upstream: ScriptedUpstream;
beforeAll(async () => {
  otlp = await startOtlpReceiver();
  upstream = await startJsonUpstream();
});
afterAll(async () => {
  await otlp.close();
  await upstream.close();
});

/** A GET on a connection of its own (the cluster hands each new connection to the next worker). */
function getAlone(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    httpGet(url, { agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

describe('tracing in a cluster', () => {
  it('exports every worker’s spans, under the service name of OTEL_SERVICE_NAME, by the time it has stopped', async () => {
    const served = await serveCli({
      UPSTREAM_URL: upstream.url,
      WORKERS: '2',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_SERVICE_NAME: 'etagere-workers',
    });
    await until(async () => (await getAlone(`${served.admin}/readyz`, {}).catch(() => 0)) === 200, 30_000, 'both workers to listen');
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++)
      statuses.push(await getAlone(`${served.url}/repos/o/worker-${i}`, { traceparent: `00-${TRACE}-b7ad6b7169203331-01` }));
    expect(statuses).toEqual(Array(12).fill(200));
    served.cli.child.kill('SIGTERM');
    await served.cli.exited;

    const servers = otlp.spans.filter((span) => span.traceId === TRACE && span.kind === 2);
    expect(servers.map((span) => span.attributes['url.path']).sort()).toEqual(
      Array.from({ length: 12 }, (_, i) => `/repos/o/worker-${i}`).sort(),
    );
    expect(new Set(servers.map((span) => span.resource['service.name']))).toEqual(new Set(['etagere-workers']));
    expect(new Set(servers.map((span) => span.resource['process.pid'])).size).toBe(2);
    const lines = logLines(served.cli).filter((line) => line.msg === 'request');
    expect(lines.length).toBe(12);
    for (const line of lines) expect(line.trace_id).toBe(TRACE);
  });
});
