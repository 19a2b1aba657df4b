/**
 * A supervisor may signal the moment it reads the "listening" line. The preloaded hook
 * (test/helpers/term-on-listening.mjs) sends SIGTERM from inside that very write, so the process
 * must already have its handlers: it stops gracefully (exit 0), not by Node's default exit by signal.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { deadPort, startJsonUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const HOOK = fileURLToPath(new URL('../helpers/term-on-listening.mjs', import.meta.url));
const TERM_ON_LISTENING = { NODE_OPTIONS: `--import ${HOOK}` };

describe('SIGTERM as soon as the listening line is written', () => {
  let upstream: ScriptedUpstream;
  beforeAll(async () => {
    upstream = await startJsonUpstream();
  });
  afterAll(async () => upstream?.close());

  it('etagere serve stops gracefully with exit 0', async () => {
    const cli = runCli(['serve'], { ...TERM_ON_LISTENING, PORT: '0', ADMIN_PORT: '0', UPSTREAM_URL: upstream.url });
    try {
      expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
      expect(cli.stdout()).toContain('etagere stopped');
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);

  it('etagere fake-upstream stops gracefully with exit 0', async () => {
    const cli = runCli(['fake-upstream', '--port', String(await deadPort())], TERM_ON_LISTENING);
    try {
      expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);

  it('etagere demo stops gracefully with exit 0', async () => {
    const [port, fakePort, admin] = [await deadPort(), await deadPort(), await deadPort()];
    const cli = runCli(['demo', '--quiet', '--port', String(port), '--fake-port', String(fakePort), '--admin-port', String(admin)], {
      ...TERM_ON_LISTENING,
      TERM_ON_WRITE: 'etagere demo',
      ETAGERE_TOKENS: undefined,
    });
    try {
      expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);
});
