/**
 * The Node ceiling: a bare node:http server that answers every request with one fixed,
 * pre-recorded response (the bytes and headers of a GitHub repo response). Nothing a proxy can
 * do on a cache hit is cheaper than this, so it bounds what etagere can reach on this machine.
 *
 *   node --import tsx bench/servers/ceiling.ts --port N [--host H] --response FILE
 *
 * FILE is JSON: {"status": 200, "headers": [["name", "value"], ...], "body": "<base64>"}.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

export interface RecordedResponse {
  readonly status: number;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Base64 of the body bytes. */
  readonly body: string;
}

function parseRecorded(text: string): RecordedResponse {
  const recorded = JSON.parse(text) as Partial<RecordedResponse>;
  if (typeof recorded.status !== 'number' || !Array.isArray(recorded.headers) || typeof recorded.body !== 'string') {
    throw new Error('response file must hold {status, headers, body}');
  }
  return { status: recorded.status, headers: recorded.headers, body: recorded.body };
}

function main(): void {
  const { values } = parseArgs({
    options: { port: { type: 'string' }, host: { type: 'string' }, response: { type: 'string' }, workers: { type: 'string' } },
    strict: true,
  });
  if (values.port === undefined || values.response === undefined) {
    process.stderr.write('usage: ceiling.ts --port N [--host H] --response FILE\n');
    process.exit(2);
  }
  const workers = Number(values.workers ?? '1');
  if (workers > 1 && cluster.isPrimary) {
    // The cluster ceiling: the same server in N processes sharing the port (kernel-balanced).
    cluster.schedulingPolicy = cluster.SCHED_NONE;
    for (let i = 0; i < workers; i++) cluster.fork();
    let up = 0;
    cluster.on('listening', () => {
      if (++up === workers)
        process.stdout.write(`ceiling listening on http://${values.host ?? '127.0.0.1'}:${values.port} (${workers} workers)\n`);
    });
    const stopAll = (): void => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
      process.exit(0);
    };
    process.once('SIGTERM', stopAll);
    process.once('SIGINT', stopAll);
    return;
  }
  const recorded = parseRecorded(readFileSync(values.response, 'utf8'));
  const body = Buffer.from(recorded.body, 'base64');
  // One flat [name, value, name, value, ...] list, built once: the cheapest form writeHead takes.
  const headers: string[] = [];
  for (const [name, value] of recorded.headers) headers.push(name.toLowerCase(), value);
  headers.push('content-length', String(body.length));

  const server = createServer({ keepAliveTimeout: 65_000 }, (_req, res) => {
    res.writeHead(recorded.status, headers);
    res.end(body);
  });
  const host = values.host ?? '127.0.0.1';
  server.listen(Number(values.port), host, () => {
    process.stdout.write(`ceiling listening on http://${host}:${values.port}\n`);
  });
  const stop = (): void => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
