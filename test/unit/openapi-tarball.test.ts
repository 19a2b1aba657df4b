import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { readTgz } from '../../scripts/openapi-descriptions.js';

// `npm run routes:generate` reads GitHub's descriptions out of @octokit/openapi's tarball in one pass.
describe('reading the @octokit/openapi tarball', () => {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-tgz-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const deep = `generated/${'d'.repeat(90)}/${'e'.repeat(40)}`; // over 100 characters: ustar's prefix field
  const contents: Record<string, string> = {
    'generated/api.github.com.json': JSON.stringify({ paths: { '/user': { get: {} } } }).repeat(40),
    'generated/ghec.json': 'x'.repeat(512),
    'generated/empty.json': '',
    [`${deep}/ghes-3.19.json`]: 'y'.repeat(1_000_003),
    'README.md': 'not wanted',
  };
  const root = join(dir, 'package');
  for (const [path, text] of Object.entries(contents)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const tgz = join(dir, 'package.tgz');
  execFileSync('tar', ['--format=ustar', '-czf', tgz, '-C', dir, 'package']);

  it('returns the wanted files whole, of any size, and passes each file path to the filter', async () => {
    const seen: string[] = [];
    const files = await readTgz(tgz, (path) => (seen.push(path), path.endsWith('.json')));
    expect(Object.fromEntries([...files].map(([path, data]) => [path, data.toString('utf8')]))).toEqual(
      Object.fromEntries(
        Object.entries(contents)
          .filter(([path]) => path.endsWith('.json'))
          .map(([path, text]) => [`package/${path}`, text]),
      ),
    );
    expect(seen.sort()).toEqual(
      Object.keys(contents)
        .map((path) => `package/${path}`)
        .sort(),
    ); // files only, not directories
  });

  it('hostile: a truncated or non-gzip tarball is an error, not a hang or a partial table', async () => {
    const whole = readFileSync(tgz);
    const truncated = join(dir, 'truncated.tgz');
    writeFileSync(truncated, whole.subarray(0, Math.floor(whole.length / 2)));
    await expect(readTgz(truncated, () => true)).rejects.toThrow(/unexpected end/i);
    const plain = join(dir, 'plain.tgz');
    writeFileSync(plain, 'not a tarball');
    await expect(readTgz(plain, () => true)).rejects.toThrow(/header/i);
    const noEnd = join(dir, 'no-end.tgz');
    writeFileSync(noEnd, gzipSync(Buffer.alloc(100)));
    await expect(readTgz(noEnd, () => true)).resolves.toEqual(new Map());
  });
});
