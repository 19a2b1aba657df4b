/**
 * The Node ceiling: a bare node:http server that answers every request with one fixed,
 * pre-recorded response (the bytes and headers of a GitHub repo response). Nothing a proxy can
 * do on a cache hit is cheaper than this, so it bounds what etagere can reach on this machine.
 *
 *   node --import tsx bench/servers/ceiling.ts --port N [--host H] --response FILE [--distinct PREFIX --keys N]
 *
 * FILE is JSON: {"status": 200, "headers": [["name", "value"], ...], "body": "<base64>"}.
 *
 * With --distinct, the server holds N responses of its own, one per path PREFIX1 .. PREFIXN, in a
 * Map looked up by the request's path: each has its own copy of the body and its own header list
 * whose ETag and X-GitHub-Request-Id are strings of their own. That is the least any in-process
 * cache of N distinct responses does per hit (one lookup, then N working sets' worth of bytes to
 * walk), so it bounds a working-set case (Zipf 10k) the way the one-response ceiling bounds a hot
 * URL. Any other path gets the recorded response.
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
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      response: { type: 'string' },
      workers: { type: 'string' },
      distinct: { type: 'string' },
      keys: { type: 'string' },
    },
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
  const one = responseOf(recorded, body, 0);
  const distinct = new Map<string | undefined, Prepared>();
  if (values.distinct !== undefined) {
    const keys = Number(values.keys ?? '0');
    for (let rank = 1; rank <= keys; rank++) distinct.set(`${values.distinct}${rank}`, responseOf(recorded, body, rank));
  }

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const { headers, body } = distinct.size === 0 ? one : (distinct.get(req.url) ?? one);
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

interface Prepared {
  /** One flat [name, value, name, value, ...] list, built once: the cheapest form writeHead takes. */
  readonly headers: string[];
  readonly body: Buffer;
}

/** Fields that differ from one response to the next: each distinct response gets its own value. */
const PER_RESPONSE = new Set(['etag', 'x-github-request-id']);

/** The recorded response (`decoded`: its body), as response number `rank` (0: the recorded one itself; else a copy of its own). */
function responseOf(recorded: RecordedResponse, decoded: Buffer, rank: number): Prepared {
  // A body of its own (not a slice of Node's shared slab, not shared with another response).
  const body = rank === 0 ? decoded : Buffer.allocUnsafeSlow(decoded.length);
  if (body !== decoded) decoded.copy(body);
  const headers: string[] = [];
  for (const [name, value] of recorded.headers) {
    const lower = name.toLowerCase();
    headers.push(lower, rank === 0 || !PER_RESPONSE.has(lower) ? value : ownValue(value, rank));
  }
  headers.push('content-length', String(body.length));
  return { headers, body };
}

/** `value` with its last characters before the final one replaced by `rank` in hex: same length, a string of its own. */
function ownValue(value: string, rank: number): string {
  const tag = rank.toString(16);
  if (value.length < tag.length + 2) return `${value}${tag}`;
  return `${value.slice(0, value.length - tag.length - 1)}${tag}${value.slice(-1)}`;
}

main();
