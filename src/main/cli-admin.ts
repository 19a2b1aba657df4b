/**
 * `etagere purge` and `etagere cache inspect|stats`: calls to a running proxy's admin port
 * (src/paths/admin/admin-cache.ts). The address is `--admin URL`, else the config's admin.host and
 * admin.port (the same file and environment `etagere serve` reads; 0.0.0.0 and :: mean this machine).
 */
import { request } from 'undici';
import type { Config } from '../platform/config/schema.js';

export interface AdminAnswer {
  status: number;
  body: string;
}

/** The admin port's URL from a config. */
export function adminUrlOf(config: Pick<Config, 'admin'>): string {
  const { host, port } = config.admin;
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** One call; a connection failure throws an Error that names the address. */
export async function adminCall(adminUrl: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<AdminAnswer> {
  const url = new URL(path, adminUrl);
  try {
    const res = await request(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new Error(`cannot reach the admin port at ${url.origin} (${typeof code === 'string' ? code : (err as Error).message})`);
  }
}

/** The JSON of an answer, indented for a terminal (the text as it came when it is not JSON). */
export function pretty(answer: AdminAnswer): string {
  try {
    return `${JSON.stringify(JSON.parse(answer.body), null, 2)}\n`;
  } catch {
    return `${answer.body}\n`;
  }
}
