/**
 * What a control request (control.ts, app-control.ts) carries, checked: its method, and its body as
 * one JSON object of at most MAX_BODY bytes. A check that fails throws an HttpError: the status and
 * message the control endpoint answers.
 */
import type { IncomingMessage } from 'node:http';
import { readCappedBody } from './request-body.js';

const MAX_BODY = 64 * 1024;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export async function readJsonObject(req: IncomingMessage, allowEmpty: boolean): Promise<Record<string, unknown>> {
  const read = await readCappedBody(req, MAX_BODY);
  if (read.kind === 'too-large') throw new HttpError(413, `Request body larger than ${MAX_BODY} bytes`);
  if (read.kind === 'failed') throw read.error;
  const text = read.text;
  if (text.trim() === '') {
    if (allowEmpty) return {};
    throw new HttpError(400, 'A JSON object body is required');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'Problems parsing JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpError(400, 'The body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

export function onlyKeys(body: Record<string, unknown>, allowed: string[]): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw new HttpError(400, `Unknown field "${key}" (allowed: ${allowed.join(', ')})`);
  }
}

export function methodGuard(req: IncomingMessage, allowed: string[]): void {
  if (!allowed.includes(req.method ?? '')) {
    throw new HttpError(405, `Method ${req.method ?? ''} not allowed here`, { allow: allowed.join(', ') });
  }
}
