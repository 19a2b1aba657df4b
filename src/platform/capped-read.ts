/**
 * A stream's bytes, read up to a cap: every bounded read of the proxy (a client's request body, a
 * webhook delivery, an upstream answer for the cache, an App's installation list, an issuer's
 * discovery document, a token's GET /rate_limit). Past the cap it stops reading and leaves the
 * stream paused and unconsumed: the caller drops the rest (`resume()`), destroys it, or hands it on.
 * Each caller keeps its own limit, errors and timeouts.
 */
import type { Readable } from 'node:stream';

export type CappedRead =
  | { kind: 'read'; chunks: Buffer[]; size: number }
  /** Past the cap: `chunks` are what was read, the chunk that went past it included. */
  | { kind: 'over'; chunks: Buffer[]; size: number }
  /** One of the failure events came first; `error` is its argument (none for `aborted` or `close`). */
  | { kind: 'failed'; error: unknown };

/** One read in progress: `done` settles once, unless `stop()` came first. */
export class CappedReader {
  readonly done: Promise<CappedRead>;
  readonly #stream: Readable;
  readonly #maxBytes: number;
  readonly #failOn: readonly string[];
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #settle: (read: CappedRead) => void = () => undefined;

  /** `failOn`: the stream's events that end the read as failed (a request body adds `aborted` or `close`). */
  constructor(stream: Readable, maxBytes: number, failOn: readonly string[] = ['error']) {
    this.#stream = stream;
    this.#maxBytes = maxBytes;
    this.#failOn = failOn;
    this.done = new Promise((resolve) => (this.#settle = resolve));
    stream.on('data', this.#onData);
    stream.once('end', this.#onEnd);
    for (const event of failOn) stream.once(event, this.#onFailed);
  }

  /** The bytes read so far. */
  get size(): number {
    return this.#size;
  }

  /** Stops listening (the stream is left as it is); `done` never settles. */
  stop(): void {
    this.#stream.off('data', this.#onData);
    this.#stream.off('end', this.#onEnd);
    for (const event of this.#failOn) this.#stream.off(event, this.#onFailed);
  }

  #finish(read: CappedRead): void {
    this.stop();
    this.#settle(read);
  }

  readonly #onData = (chunk: Buffer): void => {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#size <= this.#maxBytes) return;
    this.#stream.pause();
    this.#finish({ kind: 'over', chunks: this.#chunks, size: this.#size });
  };

  readonly #onEnd = (): void => this.#finish({ kind: 'read', chunks: this.#chunks, size: this.#size });

  readonly #onFailed = (error?: unknown): void => this.#finish({ kind: 'failed', error });
}

/** Reads `stream` to its end, or until it passes `maxBytes` (CappedReader). */
export function readCapped(stream: Readable, maxBytes: number, failOn?: readonly string[]): Promise<CappedRead> {
  return new CappedReader(stream, maxBytes, failOn).done;
}
