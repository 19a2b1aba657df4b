/**
 * The cost of rewriting API addresses in bodies: `npx tsx bench/body-rewrite.ts`.
 * Renders the fake upstream's real bodies (one repository, a page of 100 repositories), then times
 * the per-entry work: the search that decides whether a body holds API addresses (once per entry)
 * and the rewrite itself (once per entry and public base). A hit on an entry already rewritten
 * does neither; bench/by-hand.sh --rewrite-body-urls true|false measures that path end to end.
 */
import { startFakeUpstream } from '../fake-github/index.js';
import { hasUrlsUnder, rewriteBodyUrls } from '../src/http/representation.js';

async function fetchBody(base: string, path: string): Promise<Buffer> {
  const res = await fetch(`${base}${path}`);
  return Buffer.from(await res.arrayBuffer());
}

function timeIt(label: string, bytes: number, run: () => unknown): void {
  for (let index = 0; index < 200; index++) run(); // warm-up
  const rounds = Math.max(200, Math.round(50_000_000 / Math.max(bytes, 1)));
  const start = process.hrtime.bigint();
  for (let index = 0; index < rounds; index++) run();
  const micros = Number(process.hrtime.bigint() - start) / 1000 / rounds;
  process.stdout.write(`${label.padEnd(46)} ${String(bytes).padStart(8)} B  ${micros.toFixed(1).padStart(8)} µs\n`);
}

const fake = await startFakeUpstream({ orgRepoCount: 120, anonymousLimit: 1_000_000 });
try {
  const proxyBase = 'http://etagere.internal:8080';
  for (const [name, path] of [
    ['one repository', '/repos/octocat/hello-world'],
    ['100 repositories (a page)', '/orgs/etagere-org/repos?per_page=100'],
  ] as const) {
    const body = await fetchBody(fake.url, path);
    timeIt(`${name}: has API addresses?`, body.length, () => hasUrlsUnder(body, fake.url));
    timeIt(`${name}: rewrite`, body.length, () => rewriteBodyUrls(body, fake.url, proxyBase));
    timeIt(`${name}: JSON.parse (for scale)`, body.length, () => JSON.parse(body.toString()));
  }
} finally {
  await fake.close();
}
