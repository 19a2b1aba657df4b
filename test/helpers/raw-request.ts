/** One HTTP request with exactly the given headers: no client library adding or decoding a coding (Node's fetch would). */
import { request as httpRequest } from 'node:http';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as it came on the wire (still gzip when the answer is). */
  body: Buffer;
}

export function sendRaw(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawAnswer> {
  const parsed = new URL(url);
  return sendTarget(parsed.origin, parsed.pathname + parsed.search, headers, method);
}

/**
 * One request whose target is sent exactly as given (`target`: "/a/../b", "//x", "%2e%2e"): no URL
 * parsing on the way to resolve dot segments or escapes. `base` is the server's "http://host:port".
 */
export function sendTarget(
  base: string,
  target: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<RawAnswer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path: target, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
