/**
 * Pure: reading an HTTP-date (RFC 9110 section 5.6.7), strictly. A recipient accepts the three
 * formats: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
 * (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), always in UTC.
 * Names are matched case-insensitively and a zone other than GMT makes the date invalid (RFC 9111
 * section 4.2). Anything else (`0`, `99999`, an ISO date, which `Date.parse` would take for a year
 * or local time) is not a date: undefined.
 */

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, 'i');
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`, 'i');

/** Milliseconds since the epoch, when the parts make a real instant (no 31 February, no hour 24). */
function instant(year: number, month: string, day: number, hour: number, minute: number, second: number): number | undefined {
  const monthIndex = MONTHS.indexOf(month.toLowerCase());
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  const time = Date.UTC(year, monthIndex, day, hour, minute, Math.min(second, 59));
  const check = new Date(time);
  return check.getUTCFullYear() === year && check.getUTCMonth() === monthIndex && check.getUTCDate() === day ? time : undefined;
}

/**
 * RFC 9110 section 5.6.7: a two-digit year "that appears to be more than 50 years in the future" is
 * the most recent year in the past with the same last two digits.
 */
function fullYear(twoDigits: number, now: number): number {
  const thisYear = new Date(now).getUTCFullYear();
  let year = Math.floor(thisYear / 100) * 100 + twoDigits;
  if (year > thisYear + 50) year -= 100;
  return year;
}

/** An HTTP-date as ms since the epoch, or undefined when `value` is not one. `now` places RFC 850's two-digit years. */
export function parseHttpDate(value: string, now: number = Date.now()): number | undefined {
  const text = value.trim();
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) return instant(Number(match[3]), match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]));
  match = RFC850.exec(text);
  if (match !== null) {
    const year = fullYear(Number(match[3]), now);
    return instant(year, match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]));
  }
  match = ASCTIME.exec(text);
  if (match !== null)
    return instant(Number(match[6]), match[1]!, Number(match[2]!.trim()), Number(match[3]), Number(match[4]), Number(match[5]));
  return undefined;
}
