/**
 * Vary under policy `rfc9111` (RFC 9111 section 4.1): selecting header values compared in a normal
 * form (list whitespace, Accept-Language case and order of equal weights), and an Accept-Language
 * that prefers the stored response's one language selects it. The GitHub policies compare bytes.
 */
import { describe, expect, it } from 'vitest';
import { varyMatches, varySelection } from '../../src/cache/rules/key.js';
import { languageSelects, normaliseSelecting } from '../../src/cache/rules/vary-normalise.js';

const reader = (headers: Record<string, string>) => (name: string) => headers[name];
/** A Vary selection that is not "*". */
const selection = (vary: string, headers: Record<string, string>, normalise?: boolean) =>
  varySelection(vary, reader(headers), normalise) ?? null;

describe('selecting header values in normal form', () => {
  it('drops list whitespace and empty members of any field, keeping order and case', () => {
    expect(normaliseSelecting('foo', ' 1, 2 ')).toBe('1,2');
    expect(normaliseSelecting('foo', '1,,2,')).toBe('1,2');
    expect(normaliseSelecting('foo', '2,1')).toBe('2,1');
    expect(normaliseSelecting('foo', 'A')).toBe('A');
    expect(normaliseSelecting('foo', '')).toBe('');
  });
  it('reads Accept-Language case-insensitively, by weight, equal weights in any order', () => {
    const en = normaliseSelecting('accept-language', 'en, de');
    expect(normaliseSelecting('accept-language', 'de, en')).toBe(en);
    expect(normaliseSelecting('accept-language', 'eN, De')).toBe(en);
    expect(normaliseSelecting('accept-language', ' en ,   de')).toBe(en);
    expect(normaliseSelecting('accept-language', 'en;q=1, de;q=1.000')).toBe(en);
    expect(normaliseSelecting('accept-language', 'en, de;q=0.5')).not.toBe(normaliseSelecting('accept-language', 'en;q=0.5, de'));
    expect(normaliseSelecting('accept-language', 'en')).not.toBe(en);
  });
  it('a stored response in the one language the request prefers most is selected', () => {
    expect(languageSelects('fr;q=0.5, de;q=1.0', 'de')).toBe(true);
    expect(languageSelects('DE, fr;q=0.1', ' de ')).toBe(true);
    expect(languageSelects('fr, de', 'de')).toBe(false); // two equally preferred: the origin may pick fr
    expect(languageSelects('fr;q=0.9, de;q=0.5', 'de')).toBe(false);
    expect(languageSelects('de;q=0', 'de')).toBe(false);
    expect(languageSelects('de', undefined)).toBe(false);
    expect(languageSelects('de', 'de, en')).toBe(false);
    expect(languageSelects('*', '*')).toBe(false);
  });
});

describe('Vary matching', () => {
  it('rfc9111 stores the normal form and matches requests by it', () => {
    const stored = selection('Foo, accept-language', { foo: '1,2', 'accept-language': 'en, de' }, true);
    expect(stored).toEqual({ foo: '1,2', 'accept-language': 'de,en' });
    expect(varyMatches(stored, reader({ foo: ' 1, 2 ', 'accept-language': 'de, EN' }), true)).toBe(true);
    expect(varyMatches(stored, reader({ foo: '2,1', 'accept-language': 'de, en' }), true)).toBe(false);
    expect(varyMatches(stored, reader({ foo: '1,2', 'accept-language': 'fr' }), true)).toBe(false);
    expect(varyMatches(stored, reader({ 'accept-language': 'de, en' }), true)).toBe(false);
  });
  it('rfc9111 lets Accept-Language select the stored Content-Language', () => {
    const stored = selection('Accept-Language', { 'accept-language': 'en, de' }, true);
    expect(varyMatches(stored, reader({ 'accept-language': 'fr;q=0.5, de;q=1.0' }), true, () => 'de')).toBe(true);
    expect(varyMatches(stored, reader({ 'accept-language': 'fr;q=1.0, de;q=0.5' }), true, () => 'de')).toBe(false);
    expect(varyMatches(stored, reader({ 'accept-language': 'fr;q=0.5, de;q=1.0' }), true, () => undefined)).toBe(false);
  });
  it('the GitHub policies compare the bytes', () => {
    const stored = selection('Foo', { foo: '1,2' });
    expect(stored).toEqual({ foo: '1,2' });
    expect(varyMatches(stored, reader({ foo: '1,2' }))).toBe(true);
    expect(varyMatches(stored, reader({ foo: ' 1, 2 ' }))).toBe(false);
    expect(varySelection('Foo', reader({ foo: ' 1, 2 ' }))).toEqual({ foo: ' 1, 2 ' });
  });
});
