/**
 * The cyclist-count service: GET /bicyclists/<city> answers `text/plain; charset=utf-8` with the
 * count as decimal digits and nothing else (no newline). No ETag, no Last-Modified, no
 * Cache-Control, no rate-limit headers, no quota. Unknown city: 404 JSON. Other methods: 405 JSON.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { World } from './data.js';
import { JSON_TYPE, TEXT_TYPE } from './headers.js';

export const CYCLIST_PREFIX = '/bicyclists';

export interface CyclistResult {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

function json(status: number, value: unknown, extra: OutgoingHttpHeaders = {}): CyclistResult {
  const body = Buffer.from(JSON.stringify(value));
  return { status, headers: { ...extra, 'content-type': JSON_TYPE, 'content-length': body.length }, body };
}

export function cyclist(world: World, method: string, path: string): CyclistResult {
  const parts = path.split('/');
  const city = parts.length === 3 ? world.cities.get(parts[2] ?? '') : undefined;
  if (method !== 'GET' && method !== 'HEAD') {
    return json(405, { message: 'Method Not Allowed', allowed: ['GET', 'HEAD'] }, { allow: 'GET, HEAD' });
  }
  if (!city) return json(404, { message: 'Not Found', cities: [...world.cities.keys()] });
  const body = Buffer.from(String(city.count));
  return { status: 200, headers: { 'content-type': TEXT_TYPE, 'content-length': body.length }, body };
}
