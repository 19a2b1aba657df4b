/**
 * How GitHub Apps are given to the fake: the option objects, the `--app` flag syntax, and a key
 * pair generator for tests and demos (keys are made when needed, never committed).
 *
 *   --app ID[/SLUG]:KEY_FILE:INSTALLATIONS        (repeat the flag for more Apps)
 *   INSTALLATIONS := [INSTALLATION ("+" INSTALLATION)*]
 *   INSTALLATION  := INSTALLATION_ID ["@" ACCOUNT] ["=" RATE_LIMIT]
 *
 * e.g. `--app 123456/ci-app:keys/ci-app.pem:1001@etagere-org+1002@alice=12500`. KEY_FILE holds the
 * App's public key in PEM form, or its private key (the fake only keeps the public half). The
 * account defaults to etagere-org; the rate limit to the fake's token limit.
 */
import { generateKeyPairSync } from 'node:crypto';

/** A bad App or installation definition; `status` is the control endpoints' answer (400 bad input, 404 unknown App, 422 taken id). */
export class AppSpecError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 404 | 422 = 400,
  ) {
    super(message);
  }
}

export interface FakeInstallationInput {
  /** The installation id (unique across every App of the fake). */
  id: number;
  /** The account it is installed on (a login of the data set). Default etagere-org. */
  account?: string;
  /** `all` (default): every repository of the account; or a list of `owner/name` of the account. */
  repositories?: 'all' | string[];
  /** core (and graphql) requests per window for its tokens. Default: the fake's tokenLimit. GitHub: 5000 to 12,500 (15,000 on Enterprise Cloud). */
  rateLimit?: number;
}

export interface FakeAppInput {
  /** The App id (what a JWT's `iss` names). */
  id: number;
  /** Default `fake-app-<id>`; the installation tokens act as `<slug>[bot]`. */
  slug?: string;
  /** Default: the slug. */
  name?: string;
  /** The account that owns the App. Default etagere-org. */
  owner?: string;
  /** The App's public key, PEM (SPKI or PKCS#1); a private key PEM is accepted and only its public half kept. */
  publicKey: string;
  installations?: FakeInstallationInput[];
}

const INSTALLATION_RE = /^([1-9][0-9]{0,9})(?:@([A-Za-z0-9][A-Za-z0-9-]{0,38}))?(?:=([0-9]{1,6}))?$/;
const HEAD_RE = /^([1-9][0-9]{0,9})(?:\/([a-z0-9][a-z0-9-]{0,33}))?$/;

/**
 * Parses one `--app` value; `readKey` reads the key file. Throws an AppSpecError naming the part
 * that is wrong (never the key's content).
 */
export function parseAppSpec(spec: string, readKey: (path: string) => string): FakeAppInput {
  const first = spec.indexOf(':');
  const last = spec.lastIndexOf(':');
  if (first < 0 || last === first)
    throw new AppSpecError('expected ID[/SLUG]:KEY_FILE:INSTALLATIONS, e.g. 123456:app.pem:1001@etagere-org');
  const head = HEAD_RE.exec(spec.slice(0, first).trim());
  if (head === null)
    throw new AppSpecError('the App id must be a positive integer, optionally followed by /slug (lowercase letters, digits, "-")');
  const keyFile = spec.slice(first + 1, last).trim();
  if (keyFile === '') throw new AppSpecError('no key file');
  let publicKey: string;
  try {
    publicKey = readKey(keyFile);
  } catch (err) {
    throw new AppSpecError(`cannot read the key file ${keyFile}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const installations = spec
    .slice(last + 1)
    .split('+')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part, index) => {
      const match = INSTALLATION_RE.exec(part);
      if (match === null)
        throw new AppSpecError(`installation ${index + 1}: expected INSTALLATION_ID[@ACCOUNT][=RATE_LIMIT], e.g. 1001@alice=12500`);
      const installation: FakeInstallationInput = { id: Number(match[1]) };
      if (match[2] !== undefined) installation.account = match[2];
      if (match[3] !== undefined) installation.rateLimit = Number(match[3]);
      return installation;
    });
  const app: FakeAppInput = { id: Number(head[1]), publicKey, installations };
  if (head[2] !== undefined) app.slug = head[2];
  return app;
}

/** A fresh RSA key pair as GitHub hands out App keys: a PKCS#1 private key PEM and its SPKI public key PEM. */
export function generateAppKeyPair(): { privateKey: string; publicKey: string } {
  return generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
}
