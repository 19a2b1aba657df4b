/**
 * The load `npm run demo` sends: a few clients requesting popular and rare paths, a 404 now and
 * then (the proxy's one-line summary of it: src/main/demo-banner.ts).
 */
import { request } from 'undici';

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
