/**
 * Ports picked for a process that binds them a moment later (a spawned CLI or redis-server), or for
 * an address nothing should answer on. They come from below Linux's ephemeral range (32768-60999),
 * where `listen(0)` never lands: test files run in parallel, and a port released here could
 * otherwise be handed to another file's listener on port 0 before its owner binds it. Each process
 * walks its own sequence (started from its pid), and a port is handed out only if it binds now.
 */
import { createServer } from 'node:net';

const HOST = '127.0.0.1';
const LOW = 10_000;
const SPAN = 22_000; // up to 31999
const STRIDE = 7_919; // prime, so the walk visits every port of the span
let offset = (process.pid * 104_729) % SPAN;

function bindsNow(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** A loopback port that nothing listens on right now and that `listen(0)` does not hand out. */
export async function pickPort(): Promise<number> {
  for (let attempt = 0; attempt < 1_000; attempt++) {
    offset = (offset + STRIDE) % SPAN;
    const port = LOW + offset;
    if (await bindsNow(port)) return port;
  }
  throw new Error(`no free port in ${LOW}-${LOW + SPAN - 1}`);
}
