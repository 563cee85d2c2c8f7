import assert from 'node:assert/strict';
import {
  FALLBACK_LOOP_NAME,
  LOOP_NAME_MAX_LENGTH,
  isLoopName,
  loopNameFromPlan,
  slugifyLoopName,
  uniqueLoopName,
  validateLoopName,
  chooseLoopName,
  explicitLoopName,
  type LoopNameSource,
} from '../../../src/core/workspace';

const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

describe('workspace: loop names', () => {
  describe('slugifyLoopName', () => {
    const cases: Array<[input: string, expected: string]> = [
      ['Add login form', 'add-login-form'],
      ['add-login-form', 'add-login-form'],
      ['  padded  ', 'padded'],
      ['UPPER case', 'upper-case'],
      ['snake_case_name', 'snake-case-name'],
      ['dots.and.dots', 'dots-and-dots'],
      ['many   spaces\tand\ttabs', 'many-spaces-and-tabs'],
      ['--leading and trailing--', 'leading-and-trailing'],
      ['double--dash', 'double-dash'],
      ['a - b', 'a-b'],
      ['Café déjà vu', 'cafe-deja-vu'],
      ['Ünïcödé', 'unicode'],
      ['ﬁle ligature', 'file-ligature'],
      ['emoji 🚀 rocket', 'emoji-rocket'],
      ['日本語', FALLBACK_LOOP_NAME],
      ['', FALLBACK_LOOP_NAME],
      ['   ', FALLBACK_LOOP_NAME],
      ['---', FALLBACK_LOOP_NAME],
      ['!!!', FALLBACK_LOOP_NAME],
      ['../etc/passwd', 'etc-passwd'],
      ['..', FALLBACK_LOOP_NAME],
      ['/absolute/path', 'absolute-path'],
      ['C:\\Windows\\System32', 'c-windows-system32'],
      ['nul\u0000byte', 'nul-byte'],
      ['line\nbreak', 'line-break'],
      ['v1.2.3', 'v1-2-3'],
      ['123', '123'],
      ['a', 'a'],
      ['x'.repeat(48), 'x'.repeat(48)],
      ['x'.repeat(49), 'x'.repeat(48)],
      ['x'.repeat(200), 'x'.repeat(48)],
      // The cut lands on a dash: no trailing dash may survive it.
      [`${'a'.repeat(47)} b`, 'a'.repeat(47)],
      [`${'a'.repeat(47)}-----bbbb`, 'a'.repeat(47)],
      [`${'ab-'.repeat(20)}`, `${'ab-'.repeat(16)}`.replace(/-$/, '')],
    ];
    for (const [input, expected] of cases) {
      it(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => {
        assert.equal(slugifyLoopName(input), expected);
      });
    }

    it('always yields a valid loop name, for 2000 random strings', () => {
      // Deterministic PRNG so a failure is reproducible.
      let seed = 0x2f6e2b1;
      const next = () => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        return seed;
      };
      const alphabet = 'aZ09 -_./\\\u0000\n\té🚀日:*?"<>|~`\'';
      for (let n = 0; n < 2000; n++) {
        const length = next() % 120;
        let text = '';
        for (let i = 0; i < length; i++) text += [...alphabet][next() % [...alphabet].length];
        const slug = slugifyLoopName(text);
        assert.match(slug, SLUG, `slug of ${JSON.stringify(text)}`);
        assert.ok(slug.length <= LOOP_NAME_MAX_LENGTH, `length of slug of ${JSON.stringify(text)}`);
        assert.equal(slugifyLoopName(slug), slug, 'slugify is idempotent');
        assert.ok(isLoopName(slug));
      }
    });
  });

  describe('isLoopName', () => {
    const cases: Array<[string, boolean]> = [
      ['a', true],
      ['add-login-form', true],
      ['loop-2', true],
      ['x'.repeat(48), true],
      ['x'.repeat(49), false],
      ['', false],
      ['-a', false],
      ['a-', false],
      ['a--b', false],
      ['A', false],
      ['a_b', false],
      ['a.b', false],
      ['..', false],
      ['a/b', false],
      ['a b', false],
    ];
    for (const [name, expected] of cases) {
      it(`${JSON.stringify(name)} → ${expected}`, () => assert.equal(isLoopName(name), expected));
    }
  });

  describe('uniqueLoopName', () => {
    const cases: Array<[base: string, existing: string[], expected: string]> = [
      ['feature', [], 'feature'],
      ['feature', ['other'], 'feature'],
      ['feature', ['feature'], 'feature-2'],
      ['feature', ['feature', 'feature-2'], 'feature-3'],
      ['feature', ['feature', 'feature-3'], 'feature-2'],
      ['feature', ['feature', ...Array.from({ length: 9 }, (_, i) => `feature-${i + 2}`)], 'feature-11'],
      ['Feature Name', ['feature-name'], 'feature-name-2'],
      ['', [], 'loop'],
      ['', ['loop'], 'loop-2'],
      ['x'.repeat(48), ['x'.repeat(48)], `${'x'.repeat(46)}-2`],
      ['x'.repeat(48), ['x'.repeat(48), `${'x'.repeat(46)}-2`], `${'x'.repeat(46)}-3`],
      ['x'.repeat(47), ['x'.repeat(47)], `${'x'.repeat(46)}-2`],
      // Shortening must not leave a dash before the suffix.
      [`${'a'.repeat(45)}-bb`, [`${'a'.repeat(45)}-bb`], `${'a'.repeat(45)}-2`],
    ];
    for (const [base, existing, expected] of cases) {
      it(`${JSON.stringify(base.length > 20 ? `${base.slice(0, 12)}…(${base.length})` : base)} with [${existing.length} taken] → ${expected.length > 20 ? `…${expected.slice(-6)}` : expected}`, () => {
        const name = uniqueLoopName(base, existing);
        assert.equal(name, expected);
        assert.ok(isLoopName(name));
        assert.ok(!existing.includes(name));
      });
    }

    it('accepts any iterable of existing names', () => {
      assert.equal(uniqueLoopName('a', new Set(['a', 'a-2'])), 'a-3');
    });

    it('keeps long names within 48 characters for double-digit suffixes', () => {
      const base = 'y'.repeat(48);
      const taken = [base, ...Array.from({ length: 20 }, (_, i) => `${'y'.repeat(46)}-${i + 2}`)];
      taken.push(...Array.from({ length: 20 }, (_, i) => `${'y'.repeat(45)}-${i + 10}`));
      const name = uniqueLoopName(base, taken);
      assert.equal(name, `${'y'.repeat(45)}-30`);
      assert.equal(name.length, 48);
    });
  });

  describe('loopNameFromPlan', () => {
    const cases: Array<[what: string, markdown: string, expected: string]> = [
      ['Loop Name line', 'Loop Name: auth-rework\n# Something else\n', 'auth-rework'],
      ['Loop Name after the title still wins', '# Title here\n\nLoop Name: Better Name\n', 'better-name'],
      ['Loop Name is slugified', 'Loop Name: My Feature!\n', 'my-feature'],
      ['Loop Name case-insensitive', 'loop name: lower\n', 'lower'],
      ['Loop Name in bold', '**Loop Name:** bold-name\n', 'bold-name'],
      ['Loop Name label in bold', '**Loop Name**: label-bold\n', 'label-bold'],
      ['Loop Name as list item', '- Loop Name: listed\n', 'listed'],
      ['Loop Name in backticks', 'Loop Name: `ticked`\n', 'ticked'],
      ['empty Loop Name falls through to the title', 'Loop Name:\n# Real Title\n', 'real-title'],
      ['punctuation-only Loop Name falls through', 'Loop Name: ???\n# Real Title\n', 'real-title'],
      ['Loop Name is capped', `Loop Name: ${'n'.repeat(80)}\n`, 'n'.repeat(48)],
      ['title', '# Add OAuth login\n\n## Section one\n', 'add-oauth-login'],
      ['title with Plan: prefix', '# Plan: Add OAuth login\n', 'add-oauth-login'],
      ['title with closing hashes', '# Closed title ##\n', 'closed-title'],
      ['title after preamble', 'Some intro text.\n\n# The Title\n', 'the-title'],
      ['## is not a title', '## Section only\nBody words here\n', 'section-only'],
      ['#hashtag is not a title', '#hashtag\n# Real\n', 'real'],
      ['title in a code fence is ignored', '```bash\n# install deps\n```\n# Real Title\n', 'real-title'],
      ['Loop Name in a code fence is ignored', '~~~\nLoop Name: fenced\n~~~\n# Outside\n', 'outside'],
      ['nested fences', '````md\n```\n# inner\n```\n````\n# Outer\n', 'outer'],
      ['first words when there is no title', 'Refactor the storage layer to use migrations and more words\n', 'refactor-the-storage-layer-to-use'],
      ['first words skip blank lines and rules', '\n\n---\n\nFix the bug\n', 'fix-the-bug'],
      ['first words strip list markers', '- make it faster\n', 'make-it-faster'],
      ['first words from a ## heading', '## Milestone 1\n', 'milestone-1'],
      ['empty plan', '', 'loop'],
      ['whitespace plan', '  \n\n\t\n', 'loop'],
      ['only code', '```\ncode\n```\n', 'loop'],
      ['CRLF line endings', '# Windows Title\r\n\r\nbody\r\n', 'windows-title'],
      ['title with path characters', '# ../../etc/passwd\n', 'etc-passwd'],
    ];
    for (const [what, markdown, expected] of cases) {
      it(`${what} → ${expected.length > 20 ? `${expected.slice(0, 12)}…` : expected}`, () => {
        const name = loopNameFromPlan(markdown);
        assert.equal(name, expected);
        assert.ok(isLoopName(name));
      });
    }
  });

  describe('validateLoopName', () => {
    const rejected: Array<[input: string, messagePart: RegExp]> = [
      ['', /empty/],
      ['   ', /empty/],
      ['../x', /path separator/],
      ['..\\x', /path separator/],
      ['a/b', /path separator/],
      ['a\\b', /path separator/],
      ['/abs', /path separator/],
      ['/', /path separator/],
      ['C:\\Users\\x', /path separator/],
      ['C:x', /drive path/],
      ['c:', /drive path/],
      ['.', /starts with "\."/],
      ['..', /starts with "\."/],
      ['...', /starts with "\."/],
      ['.hidden', /starts with "\."/],
      [' ..', /starts with "\."/],
      ['nul\u0000byte', /NUL or control/],
      ['tab\there', /NUL or control/],
      ['line\nbreak', /NUL or control/],
      ['!!!', /no letters or digits/],
      ['日本語', /no letters or digits/],
      ['x'.repeat(49), /49 characters.*limit is 48/],
    ];
    for (const [input, messagePart] of rejected) {
      it(`rejects ${JSON.stringify(input)}`, () => {
        const result = validateLoopName(input);
        assert.equal(result.ok, false);
        if (!result.ok) {
          assert.match(result.message, messagePart);
          assert.ok(result.message.includes(JSON.stringify(input)) || input.trim() === '', 'the message quotes the name');
        }
      });
    }

    const accepted: Array<[input: string, name: string, changed: boolean]> = [
      ['my-feature', 'my-feature', false],
      ['loop-2', 'loop-2', false],
      ['My Feature', 'my-feature', true],
      ['  spaced  ', 'spaced', true],
      ['v1.2', 'v1-2', true],
      ['a..b', 'a-b', true],
      ['x'.repeat(48), 'x'.repeat(48), false],
    ];
    for (const [input, name, changed] of accepted) {
      it(`accepts ${JSON.stringify(input.length > 20 ? `${input.slice(0, 8)}…` : input)} as ${name.length > 20 ? '…' : name}`, () => {
        assert.deepEqual(validateLoopName(input), { ok: true, name, changed });
      });
    }
  });

  describe('chooseLoopName: one rule for --name and the plan\'s Loop Name line', () => {
    const sources: LoopNameSource[] = ['option', 'plan'];
    const refused: Array<[input: string, messagePart: RegExp]> = [
      ['../x', /path separator/],
      ['../../evil', /path separator/],
      ['a/b', /path separator/],
      ['a\\b', /path separator/],
      ['/abs', /path separator/],
      ['C:x', /drive path/],
      ['..', /starts with "\."/],
      ['.hidden', /starts with "\."/],
      ['tab\there', /NUL or control/],
      ['🔥', /no letters or digits/],
      ['???', /no letters or digits/],
      ['n'.repeat(80), /80 characters.*limit is 48/],
    ];
    for (const source of sources) {
      for (const [input, messagePart] of refused) {
        it(`refuses ${JSON.stringify(input.length > 20 ? `${input.slice(0, 8)}…` : input)} from ${source === 'option' ? '--name' : 'the plan'}`, () => {
          const chosen = chooseLoopName(input, source);
          assert.equal(chosen.ok, false);
          if (chosen.ok) return;
          assert.match(chosen.message, messagePart);
          assert.ok(chosen.message.includes(JSON.stringify(input)), chosen.message);
          if (source === 'plan') assert.match(chosen.message, /the plan's "Loop Name:" line/);
          else assert.doesNotMatch(chosen.message, /plan/);
        });
      }
    }

    const changed: Array<[input: string, name: string]> = [
      ['🔥loop', 'loop'],
      ['My Feature', 'my-feature'],
      ['-rf', 'rf'],
      ['v1.2', 'v1-2'],
      ['snake_case', 'snake-case'],
      ['Café', 'cafe'],
      ['a..b', 'a-b'],
    ];
    for (const source of sources) {
      for (const [input, name] of changed) {
        it(`changes ${JSON.stringify(input)} from ${source === 'option' ? '--name' : 'the plan'} to ${name} and says so`, () => {
          const chosen = chooseLoopName(input, source);
          assert.ok(chosen.ok);
          if (!chosen.ok) return;
          assert.equal(chosen.name, name);
          const from = source === 'plan' ? ' from the plan' : '';
          assert.equal(
            chosen.notice,
            `Loop name ${JSON.stringify(input)}${from} was changed to "${name}": loop names use lower-case letters a-z, digits 0-9 and single dashes, at most 48 characters, because a name is the branch forge/<name> and the folder of its worktree.`,
          );
        });
      }
      it(`keeps a valid name from ${source} without a notice (surrounding spaces do not count as a change)`, () => {
        assert.deepEqual(chooseLoopName('add-login-2', source), { ok: true, name: 'add-login-2', notice: null });
        assert.deepEqual(chooseLoopName('  add-login  ', source), { ok: true, name: 'add-login', notice: null });
        assert.deepEqual(chooseLoopName('x'.repeat(48), source), { ok: true, name: 'x'.repeat(48), notice: null });
      });
    }

    it('explicitLoopName reads the first Loop Name line outside fences, without the markdown around the name', () => {
      const cases: Array<[markdown: string, name: string | null]> = [
        ['Loop Name: ../../evil\n# T\n', '../../evil'],
        ['Loop Name: 🔥loop\n', '🔥loop'],
        ['**Loop Name:** bold-name\n', 'bold-name'],
        ['**Loop Name**: label-bold\n', 'label-bold'],
        ['- Loop Name: listed\n', 'listed'],
        ['Loop Name: `ticked`\n', 'ticked'],
        ['loop name: lower\n', 'lower'],
        ['Loop Name:\nLoop Name: second\n', 'second'],
        ['```\nLoop Name: fenced\n```\n# Outside\n', null],
        ['# Just a title\n', null],
      ];
      for (const [markdown, name] of cases) assert.equal(explicitLoopName(markdown), name, markdown);
    });
  });
});
