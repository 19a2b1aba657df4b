/** A tiny scriptable upstream for proxy tests where the fake API is not the point. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pickPort } from './ports.js';

export interface ScriptedUpstream {
  url: string;
  server: Server;
  /** Requests received, in order. */
  seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }>;
  close(): Promise<void>;
}

export async function startScriptedUpstream(
  handle: (req: IncomingMessage, res: ServerResponse, body: string) => void,
): Promise<ScriptedUpstream> {
  const seen: ScriptedUpstream['seen'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handle(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An upstream that answers every request 200 with an empty JSON object. */
export function startJsonUpstream(): Promise<ScriptedUpstream> {
  return startScriptedUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
}

/** A port that nothing listens on (test/helpers/ports.ts: never one that `listen(0)` hands to another file). */
export function deadPort(): Promise<number> {
  return pickPort();
}
