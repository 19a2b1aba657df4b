/**
 * Throwaway certificates for the HTTPS listener tests, made with the openssl CLI in a temporary
 * directory (no private key is ever committed): a CA, and server pairs for localhost and
 * 127.0.0.1 signed by it. The keys' lines are recorded as secrets for the scan after the suite.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { recordSecret } from './secrets.js';
import { inTestFile } from './capture.js';

export interface Pair {
  cert: string;
  key: string;
  /** SHA-256 fingerprint as Node's getPeerCertificate() shows it (AA:BB:...). */
  fingerprint: string;
}

export interface TestCa {
  /** The CA's certificate (what SSL_CERT_FILE points at). */
  cert: string;
  /** A new server pair for localhost and 127.0.0.1, as files `<name>.pem` and `<name>.key` in the directory. */
  server(name: string): Pair;
}

/** Whether the openssl CLI runs here. */
export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const openssl = (dir: string, args: string[]): void => {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
};

function recordKey(path: string): void {
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.length >= 40 && !line.startsWith('-----'));
  lines.forEach((line, index) => recordSecret(`TLS private key ${path} line ${index + 1}${inTestFile()}`, line));
}

export function makeTestCa(dir: string): TestCa {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-days', '2', '-subj', '/CN=etagere test CA', '-keyout', 'ca.key', '-out', 'ca.pem']);
  recordKey(join(dir, 'ca.key'));
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  return {
    cert: join(dir, 'ca.pem'),
    server(name) {
      openssl(dir, ['req', ...ec, '-subj', '/CN=localhost', '-keyout', `${name}.key`, '-out', `${name}.csr`]);
      openssl(dir, [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-days',
        '2',
        '-extfile',
        'san.ext',
        '-out',
        `${name}.pem`,
      ]);
      const cert = join(dir, `${name}.pem`);
      const key = join(dir, `${name}.key`);
      recordKey(key);
      return { cert, key, fingerprint: new X509Certificate(readFileSync(cert)).fingerprint256 };
    },
  };
}
