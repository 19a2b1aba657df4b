/**
 * HTTPS on the proxy listener (`listen.tls`): the certificate and key are read at start-up, and
 * again on SIGHUP and when either file changes, into the running server (`setSecureContext`: new
 * connections get the new pair, open ones keep theirs). A new pair that cannot be used (unreadable,
 * not PEM, a key of another certificate) is logged and the old one stays.
 */
import { createHash } from 'node:crypto';
import { createServer, type RequestListener, type Server, type ServerOptions } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Logger } from '../platform/log/logger.js';
import { TlsFilesError, readTlsPair, type TlsFiles, type TlsPair } from '../platform/config/tls-files.js';
import { watchFile, type FileWatch } from '../pool/members/watch-file.js';

/** A TLS handshake must be done in this time (Node's default is 120 s: a cheap way to hold sockets). */
export const HANDSHAKE_TIMEOUT_MS = 10_000;

export interface TlsReload {
  /** Reads the pair again and serves it when it changed; false when the new pair was refused (the old one stays). */
  reload(trigger: 'signal' | 'file'): boolean;
  close(): void;
}

/** The SHA-256 fingerprint of a PEM certificate's first certificate, as logged (public, never a secret). */
function fingerprintOf(cert: Buffer): string {
  const der = /-----BEGIN CERTIFICATE-----([^-]+)-----END CERTIFICATE-----/.exec(cert.toString('latin1'))?.[1];
  return der === undefined ? '?' : createHash('sha256').update(Buffer.from(der, 'base64')).digest('hex').slice(0, 16);
}

export function tlsReload(server: HttpsServer, files: TlsFiles, first: TlsPair, logger: Logger, watch = true): TlsReload {
  const log = logger.child({ component: 'tls' });
  let current = first;
  const reload = (trigger: 'signal' | 'file'): boolean => {
    let pair: TlsPair;
    try {
      pair = readTlsPair(files);
    } catch (err) {
      const message = err instanceof TlsFilesError ? err.message : 'listen.tls: the new pair could not be read';
      log.warn({ trigger, problem: message }, 'TLS certificate not reloaded: the listener keeps the one it has');
      return false;
    }
    if (pair.cert.equals(current.cert) && pair.key.equals(current.key)) return true;
    try {
      server.setSecureContext({ cert: pair.cert, key: pair.key });
    } catch {
      log.warn({ trigger }, 'TLS certificate not reloaded: refused by TLS; the listener keeps the one it has');
      return false;
    }
    current = pair;
    log.info({ trigger, certFile: files.cert_file, fingerprint: fingerprintOf(pair.cert) }, 'TLS certificate reloaded');
    return true;
  };
  const watches: FileWatch[] = watch
    ? [files.cert_file, files.key_file].map((file) => watchFile(file, () => void reload('file'), log, undefined, 'TLS file'))
    : [];
  return {
    reload,
    close: () => {
      for (const fileWatch of watches) fileWatch.close();
    },
  };
}

/** The proxy listener: plain HTTP, or with `files` HTTPS (the same handler) and its certificate's reload. */
export function createListener(
  files: TlsFiles | null,
  options: ServerOptions,
  onRequest: RequestListener,
  logger: Logger,
): { server: Server; tls: TlsReload | undefined } {
  if (files === null) return { server: createServer(options, onRequest), tls: undefined };
  const pair = readTlsPair(files);
  const secure = createHttpsServer({ ...options, cert: pair.cert, key: pair.key, handshakeTimeout: HANDSHAKE_TIMEOUT_MS }, onRequest);
  return { server: secure, tls: tlsReload(secure, files, pair, logger) };
}
