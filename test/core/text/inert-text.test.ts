import { strict as assert } from 'node:assert';
import { hasActiveCharacter, inertJson, inertLine, inertText } from '../../../src/core/text/inert-text';

/** Every code point a terminal, editor or browser acts on instead of showing (TAB, LF, CR apart). */
const ACTIVE: number[] = [
  ...range(0x00, 0x08),
  ...range(0x0b, 0x0c),
  ...range(0x0e, 0x1f),
  ...range(0x7f, 0x9f),
  0x061c,
  0x200e,
  0x200f,
  0x2028,
  0x2029,
  ...range(0x202a, 0x202e),
  ...range(0x2066, 0x2069),
];

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** Raw bytes a terminal would act on: any C0 but TAB/LF, DEL, or the UTF-8 of C1 / bidi / separators. */
function activeIn(text: string): string[] {
  return [...text].filter((c) => ACTIVE.includes(c.codePointAt(0)!) || c === '\r');
}

describe('inert text: model text shown, never acted on', () => {
  it('escapes every active code point as \\uXXXX, in text and in one-line form', () => {
    for (const cp of ACTIVE) {
      const c = String.fromCodePoint(cp);
      const expected = `a\\u${cp.toString(16).padStart(4, '0')}b`;
      assert.equal(inertText(`a${c}b`), expected, `U+${cp.toString(16)}`);
      assert.equal(inertLine(`a${c}b`), expected, `U+${cp.toString(16)}`);
      assert.ok(hasActiveCharacter(`a${c}b`));
    }
  });

  it('leaves printable text untouched, including non-Latin scripts, emoji and backslashes', () => {
    const plain = 'src/ä/日本語.ts: 👩‍💻 C:\\path «quoted» — ok ½ \u00a0 \u200d';
    assert.equal(inertText(plain), plain);
    assert.equal(inertLine(plain), plain);
    assert.ok(!hasActiveCharacter(plain));
    // Every printable code point of the BMP below the surrogates stays as is.
    for (let cp = 0x20; cp < 0xd800; cp++) {
      if (ACTIVE.includes(cp)) continue;
      const c = String.fromCharCode(cp);
      if (inertLine(c) !== c) assert.fail(`U+${cp.toString(16)} was changed`);
    }
  });

  it('keeps line breaks and tabs in text, escapes them in a line; a lone CR never returns the cursor', () => {
    assert.equal(inertText('one\n\ttwo\r\nthree'), 'one\n\ttwo\nthree');
    assert.equal(inertText('safe\rFAKE'), 'safe\\u000dFAKE');
    assert.equal(inertLine('one\ntwo\tthree\rfour'), 'one\\u000atwo\\u0009three\\u000dfour');
    assert.ok(!hasActiveCharacter('one\ntwo\tx', { allowLineBreaks: true }));
    assert.ok(hasActiveCharacter('one\ntwo'));
  });

  it('defuses the sequences a hostile model writes: clear screen, window title, hyperlinks, 8-bit CSI, NUL, bidi override', () => {
    const hostile = 'a.ts\u001b[2J\u001b[H\u001b]0;pwned\u0007\u001b]8;;https://evil.example\u001b\\x\u009b31m\u0000\u202eexe.txt';
    for (const out of [inertText(hostile), inertLine(hostile)]) {
      assert.deepEqual(activeIn(out), []);
      assert.equal(out, 'a.ts\\u001b[2J\\u001b[H\\u001b]0;pwned\\u0007\\u001b]8;;https://evil.example\\u001b\\x\\u009b31m\\u0000\\u202eexe.txt');
    }
  });

  it('inertJson is valid JSON with no active character whose value is the original', () => {
    const everything = String.fromCodePoint(...ACTIVE) + '\r\n\t"\\ plain 日本';
    const value = { file: everything, nested: [{ d: everything }], n: 1, ok: true, none: null };
    const json = inertJson(value);
    assert.deepEqual(activeIn(json), []);
    assert.ok(!json.includes('\n') && !json.includes('\t'));
    assert.deepEqual(JSON.parse(json), value);
  });

  it('is idempotent: escaping twice changes nothing more', () => {
    const once = inertText('x\u001b[2J\u202e\ny');
    assert.equal(inertText(once), once);
    assert.equal(inertLine(inertLine('a\nb\u0000')), inertLine('a\nb\u0000'));
  });
});
