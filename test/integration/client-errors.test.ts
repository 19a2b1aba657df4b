import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

/** Sends raw bytes and collects everything until the server closes the connection (5 s deadline). */
function exchange(url: string, bytes: string, onServerSide?: () => void): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(Number(port), hostname, () => {
      socket.write(bytes);
      onServerSide?.();
    });
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within 5 s; got ${JSON.stringify(text)}`));
    }, 5_000);
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.on('error', () => undefined);
  });
}

describe('answers to requests the parser gives up on', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  beforeAll(async () => {
    upstream = await startScriptedUpstream((_req, res) => res.end('{}'));
    proxy = await startTestProxy({ upstreams: [{ name: 'main', prefix: '/', url: upstream.url }] });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it('a request not received in time gets a GitHub-shaped 408 and the connection closes', async () => {
    // Node reports a request whose headers did not arrive within headersTimeout as a clientError
    // with code ERR_HTTP_REQUEST_TIMEOUT (its periodic check runs every 30 s, too slow for a test,
    // so the error is raised on the server-side socket the way Node raises it).
    const serverSide = new Promise<Socket>((resolve) => proxy.server.once('connection', resolve));
    const answer = await exchange(proxy.url, 'GET /slow HTTP/1.1\r\nHost: x\r\n', () => {
      void serverSide.then((socket) => {
        const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
        proxy.server.emit('clientError', err, socket);
      });
    });
    expect(answer.startsWith('HTTP/1.1 408 Request Timeout\r\n')).toBe(true);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { message: string; documentation_url: string };
    expect(body.message).toMatch(/timeout/i);
    expect(typeof body.documentation_url).toBe('string');
  });

  it('a Host that is not host[:port] gets a 400 JSON', async () => {
    const answer = await exchange(proxy.url, 'GET /x HTTP/1.1\r\nHost: evil.example/path\r\nConnection: close\r\n\r\n');
    expect(answer.startsWith('HTTP/1.1 400')).toBe(true);
    expect(answer).toContain('invalid Host header');
    expect(upstream.seen).toHaveLength(0);
  });
});
