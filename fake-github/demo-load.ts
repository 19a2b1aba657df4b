/**
 * What `npm run demo` shows: a small built-in consumer load (a few clients requesting popular
 * and rare paths, a 404 now and then) and a one-line-per-second summary of the proxy: requests,
 * hit ratio, quota saved, and each pool token's remaining quota.
 */
import { request } from 'undici';
import type { RecentSummary } from '../src/platform/metrics/recent.js';

/** Popular paths first: the consumer picks them far more often than the rare ones. */
const PATHS = [
  '/repos/octocat/hello-world',
  '/users/octocat',
  '/orgs/etagere-org/repos?per_page=10',
  '/repos/octocat/spoon-knife',
  '/users/alice',
  '/repos/etagere-org/repo-001',
  '/bicyclists/helsinki',
  '/users/no-such-user',
];

export interface DemoLoad {
  stop(): Promise<void>;
}

/** `clients` loops, each sending a request every `intervalMs` (skewed towards popular paths). */
export function startDemoLoad(baseUrl: string, clients = 3, intervalMs = 150): DemoLoad {
  let running = true;
  let seq = 0;
  const loop = async (): Promise<void> => {
    while (running) {
      const requestNumber = seq++;
      // Square of a uniform number: index 0 about 35 % of the time, the last one rarely.
      const pathIndex = Math.floor(Math.random() ** 2 * PATHS.length);
      const rare = requestNumber % 25 === 0 ? `${PATHS[pathIndex]!.includes('?') ? '&' : '?'}demo=${requestNumber}` : '';
      try {
        const response = await request(baseUrl + PATHS[pathIndex]! + rare);
        await response.body.dump();
      } catch {
        // the demo keeps going while the proxy restarts or stops
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  };
  const loops = Array.from({ length: clients }, loop);
  return {
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

export interface TokenLine {
  name: string;
  remaining: number | null;
  limit: number | null;
  state: string;
}

/** One summary line, e.g. `requests 120 | hit ratio 71.7 % | quota saved 86 | alice-public 52/60 ok`. */
export function summaryLine(recent: RecentSummary, tokens: readonly TokenLine[]): string {
  const ratio = recent.hitRatio === null ? '-' : `${(recent.hitRatio * 100).toFixed(1)} %`;
  const parts = [`requests ${recent.requests}`, `hit ratio ${ratio}`, `quota saved ${recent.saved}`];
  for (const token of tokens)
    parts.push(`${token.name} ${token.remaining ?? '?'}/${token.limit ?? '?'}${token.state === 'ok' ? '' : ` ${token.state}`}`);
  return parts.join(' | ');
}
