/**
 * The proxy listener's certificate and key (`listen.tls`): read and checked as a pair (a PEM
 * certificate, a PEM private key, the one matching the other). A problem is one line naming the
 * key and the file, never what the file holds.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';

export interface TlsFiles {
  readonly cert_file: string;
  readonly key_file: string;
}

export interface TlsPair {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** A certificate chain or a key is a few KiB: a larger file (or a device) is a mistake. */
const MAX_PEM_BYTES = 1024 * 1024;

export class TlsFilesError extends Error {
  override name = 'TlsFilesError';
}

function readPem(key: 'cert_file' | 'key_file', file: string): Buffer {
  try {
    const stat = statSync(file);
    if (!stat.isFile()) throw new TlsFilesError(`listen.tls.${key}: ${file} is not a regular file`);
    if (stat.size > MAX_PEM_BYTES) throw new TlsFilesError(`listen.tls.${key}: ${file} is over ${MAX_PEM_BYTES} bytes`);
    return readFileSync(file);
  } catch (err) {
    if (err instanceof TlsFilesError) throw err;
    throw new TlsFilesError(`listen.tls.${key}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

/** Reads and checks the pair; throws a TlsFilesError (one line, no file content) when it is not usable. */
export function readTlsPair(files: TlsFiles): TlsPair {
  const cert = readPem('cert_file', files.cert_file);
  const key = readPem('key_file', files.key_file);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch {
    throw new TlsFilesError(`listen.tls.cert_file: ${files.cert_file} is not a PEM certificate`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new TlsFilesError(`listen.tls.key_file: ${files.key_file} is not a PEM private key (an encrypted key is not supported)`);
  }
  if (!certificate.checkPrivateKey(privateKey))
    throw new TlsFilesError(`listen.tls.key_file: ${files.key_file} is not the key of the certificate in ${files.cert_file}`);
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    // OpenSSL's reason only (e.g. "ee key too small"): never the bytes.
    const reason =
      String((err as Error).message)
        .split(':')
        .pop()
        ?.trim() ?? 'refused';
    throw new TlsFilesError(`listen.tls: ${files.cert_file} and ${files.key_file} are refused by TLS: ${reason}`);
  }
  return { cert, key };
}
