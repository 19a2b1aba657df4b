/**
 * The full warm-up of a working-set case: every URL of the set fetched once, a few requests in
 * flight at a time on keep-alive connections, before the timed warm-up. Without it the tail of a
 * Zipf 10k set is still being fetched during the measured run, which then measures misses.
 */
import { Agent, request } from 'node:http';

export interface PrefetchSpec {
  readonly origin: string;
  readonly paths: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** Per request. */
  readonly timeoutMs: number;
}

function fetchOnce(agent: Agent, url: string, spec: PrefetchSpec): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', agent, headers: spec.headers, timeout: spec.timeoutMs }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
      res.once('error', reject);
    });
    req.once('timeout', () => req.destroy(new Error(`GET ${url}: timed out after ${spec.timeoutMs} ms`)));
    req.once('error', reject);
    req.end();
  });
}

/** Fetches every path once; throws on the first answer that is not 200 (the run would measure an error path). */
export async function prefetchAll(spec: PrefetchSpec): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < spec.paths.length) {
      const path = spec.paths[next++] ?? '/';
      const status = await fetchOnce(agent, `${spec.origin}${path}`, spec);
      if (status !== 200) throw new Error(`warm-up GET ${path} answered ${status}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: spec.concurrency }, worker));
  } finally {
    agent.destroy();
  }
}
