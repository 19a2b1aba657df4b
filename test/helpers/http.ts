/** Plain HTTP calls of the integration tests: an answer read whole, and a JSON POST that must succeed. */
import { request } from 'undici';
import { expect } from 'vitest';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(url, { headers });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/** POSTs `body` as JSON (a control endpoint of the fake) and expects a 200. */
export async function post(url: string, body: unknown): Promise<void> {
  const res = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

/** `count` GETs of `${url}/users/octocat?${tag}=N`, each a miss, 6 at a time: the answers that were not 200. */
export async function missBurst(url: string, tag: string, count = 60): Promise<string[]> {
  const failed: string[] = [];
  for (let first = 0; first < count; first += 6) {
    const answers = await Promise.all(Array.from({ length: 6 }, (_, offset) => get(`${url}/users/octocat?${tag}=${first + offset}`)));
    for (const answer of answers) if (answer.status !== 200) failed.push(`${answer.status} ${answer.body.slice(0, 120)}`);
  }
  return failed;
}
