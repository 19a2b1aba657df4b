/**
 * Pagination of list endpoints: `per_page` (default 30, max 100) and `page` (default 1), and the
 * `Link` header with absolute URLs on the fake's base URL that keep every other query parameter.
 */

export const DEFAULT_PER_PAGE = 30;
export const MAX_PER_PAGE = 100;

export interface PageRequest {
  page: number;
  perPage: number;
}

function positiveInt(value: string | null): number | null {
  if (value === null || !/^\d{1,9}$/.test(value.trim())) return null;
  const parsed = Number(value.trim());
  return parsed >= 1 ? parsed : null;
}

export function pageRequest(params: URLSearchParams): PageRequest {
  const perPage = Math.min(positiveInt(params.get('per_page')) ?? DEFAULT_PER_PAGE, MAX_PER_PAGE);
  const page = positiveInt(params.get('page')) ?? 1;
  return { page, perPage };
}

export interface Page<T> {
  items: T[];
  last: number;
}

export function paginate<T>(all: T[], req: PageRequest): Page<T> {
  const last = Math.max(1, Math.ceil(all.length / req.perPage));
  const start = (req.page - 1) * req.perPage;
  return { items: all.slice(start, start + req.perPage), last };
}

/** The query string with its `page` parameter set to `page` (replacing every `page` parameter, else appending). */
export function withPage(rawQuery: string, page: number): string {
  const parts = rawQuery === '' ? [] : rawQuery.split('&');
  const out: string[] = [];
  let placed = false;
  for (const part of parts) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    if (name === 'page') {
      if (!placed) out.push(`page=${page}`);
      placed = true;
    } else {
      out.push(part);
    }
  }
  if (!placed) out.push(`page=${page}`);
  return out.join('&');
}

/**
 * GitHub's Link header: rel order prev, next, last, first. No header when everything fits on
 * the first page.
 */
export function linkHeader(base: string, path: string, rawQuery: string, page: number, last: number): string | null {
  if (page === 1 && last === 1) return null;
  const url = (n: number): string => `<${base}${path}?${withPage(rawQuery, n)}>`;
  const links: string[] = [];
  if (page > 1) links.push(`${url(page - 1)}; rel="prev"`);
  if (page < last) {
    links.push(`${url(page + 1)}; rel="next"`);
    links.push(`${url(last)}; rel="last"`);
  }
  if (page > 1) links.push(`${url(1)}; rel="first"`);
  return links.join(', ');
}
