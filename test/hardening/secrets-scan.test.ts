/**
 * The secrets scan that runs after the whole suite (test/helpers/secrets-scan.ts): it finds a
 * planted token and names it without printing it, and the captures it scans really hold what a
 * test proxy said (log, metrics, admin answers, error answers) and the secrets to look for.
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { CAPTURE_DIR_ENV, SECTION_MARK, capturing } from '../helpers/capture.js';
import { startTestProxy } from '../helpers/proxy.js';
import { recordedSecrets, scanForSecrets } from '../helpers/secrets-scan.js';
import { testSecret } from '../helpers/secrets.js';

describe('secrets scan', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'etagere-scan-test-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('finds a planted token, naming the file, section and secret but never the value', async () => {
    const planted = 'planted_token_value_8f3e1c';
    await mkdir(join(dir, 'captures'));
    await mkdir(join(dir, 'secrets'));
    await writeFile(join(dir, 'captures', 'clean.txt'), `${SECTION_MARK}proxy log\n{"msg":"request","status":200}\n`);
    await writeFile(
      join(dir, 'captures', 'leaky.txt'),
      `${SECTION_MARK}proxy log\n{"msg":"request"}\n${SECTION_MARK}admin /admin/tokens\n{"last_error":"bad token ${planted}"}\n`,
    );
    // The values themselves are kept under secrets/: never a hit.
    await writeFile(join(dir, 'secrets', '1.jsonl'), `${JSON.stringify({ name: 'planted pool token', value: planted })}\n`);

    const secrets = [
      ...recordedSecrets(dir),
      { name: 'short one', value: 'abc' },
      { name: 'absent token', value: 'absent_token_value_123' },
    ];
    const result = scanForSecrets(dir, secrets);
    expect(result).toMatchObject({ files: 2, tokens: 2, skipped: 1 });
    expect(result.hits).toEqual([{ file: join('captures', 'leaky.txt'), section: 'admin /admin/tokens', secret: 'planted pool token' }]);
    expect(JSON.stringify(result)).not.toContain(planted);
  });

  it('finds GitHub-shaped tokens nobody registered', async () => {
    const other = await mkdtemp(join(tmpdir(), 'etagere-scan-test-'));
    try {
      await writeFile(join(other, 'log.txt'), `${SECTION_MARK}cli output\nusing github_pat_11ABCDEFG0123456789_abcdefghijklmnop\n`);
      await writeFile(join(other, 'ok.txt'), `${SECTION_MARK}cli output\nghp_ is the prefix of classic tokens; x-etagere-token: pool-a\n`);
      const result = scanForSecrets(other, []);
      expect(result.hits).toEqual([{ file: 'log.txt', section: 'cli output', secret: 'a fine-grained GitHub token (github_pat_)' }]);
      // A GitHub App's secrets: its JWT and its private key.
      const jwt = `${Buffer.from('{"alg":"RS256","typ":"JWT"}').toString('base64url')}.${Buffer.from('{"iss":123456,"iat":1}').toString('base64url')}.${'s'.repeat(40)}`;
      await writeFile(
        join(other, 'app.txt'),
        `${SECTION_MARK}app log
minting with Bearer ${jwt}
${SECTION_MARK}app error
-----BEGIN RSA PRIVATE KEY-----
MIIE
`,
      );
      expect(scanForSecrets(other, []).hits.filter((hit) => hit.file === 'app.txt')).toEqual([
        { file: 'app.txt', section: 'app log', secret: 'a signed JWT (a GitHub App JWT?)' },
        { file: 'app.txt', section: 'app error', secret: 'a private key (PEM)' },
      ]);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  describe.runIf(capturing())('captures of a test proxy (during a vitest run)', () => {
    const POOL_TOKEN = testSecret('secrets-scan test pool token', 'scan_test_pool_token_5d1a');
    const CLIENT_TOKEN = testSecret('secrets-scan test client token', 'scan_test_client_token_9b7c');
    let fake: FakeUpstream;
    beforeAll(async () => {
      fake = await startFakeUpstream({ tokens: parseTokenSpec(`${POOL_TOKEN}@alice:public_repo,${CLIENT_TOKEN}@bob:public_repo`) });
    });
    afterAll(async () => {
      await fake?.close();
    });

    it('hold the log, /metrics, the admin answers and error answers, and the secrets to look for', async () => {
      const proxy = await startTestProxy({
        upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
        pool: { tokens: [{ name: 'scan-pool', value: POOL_TOKEN }] },
      });
      const missing = await request(`${proxy.url}/repos/nobody/nothing?q=1`, { headers: { authorization: `token ${CLIENT_TOKEN}` } });
      expect(missing.statusCode).toBe(404);
      await missing.body.dump();
      const ok = await request(`${proxy.url}/users/octocat`);
      expect(ok.statusCode).toBe(200);
      await ok.body.dump();
      await proxy.close();

      const base = process.env[CAPTURE_DIR_ENV]!;
      const text = await readFile(join(base, 'captures', `${process.pid}.txt`), 'utf8');
      // Section labels name the test file they come from.
      const sections = text
        .split(SECTION_MARK)
        .map((s) => s.slice(0, s.indexOf('\n')).replace(' in test/hardening/secrets-scan.test.ts', ''));
      for (const want of [
        `test proxy ${proxy.url}: log`,
        `test proxy ${proxy.url}: admin /metrics`,
        `test proxy ${proxy.url}: admin /admin/tokens`,
      ]) {
        expect(sections).toContain(want);
      }
      expect(sections).toContain('proxy answer 404 to GET /repos/nobody/nothing: body');
      expect(text).toContain('etagere_requests_total');
      expect(text).toContain('"name":"scan-pool"');
      const recorded = recordedSecrets(base);
      expect(recorded.map((s) => s.value)).toEqual(expect.arrayContaining([POOL_TOKEN, CLIENT_TOKEN]));
    });
  });
});
