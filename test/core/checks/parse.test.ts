import { strict as assert } from 'node:assert';
import {
  describeCheckProblems,
  parseGoalCheckOptions,
  parseSectionChecks,
  parseVerificationChecks,
  readCodeSpan,
} from '../../../src/core/checks/parse';
import type { CheckSpec } from '../../../src/core/checks/types';
import { normaliseWorktreePath } from '../../../src/core/checks/worktree-path';
import { parsePlan } from '../../../src/core/loop/plan';

/** What a spec asserts, in one comparable tuple. */
function what(spec: CheckSpec): unknown[] {
  switch (spec.kind) {
    case 'command':
      return ['command', spec.command];
    case 'exists':
      return ['exists', spec.path];
    case 'contains':
      return ['contains', spec.path, spec.text];
    case 'matches':
      return ['matches', spec.path, spec.pattern, spec.flags];
  }
}

describe('checks: parsing a plan\'s Verification part', () => {
  it('reads fenced sh/bash/shell blocks (one check each, the text is the script) and code-span list lines', () => {
    const parsed = parseVerificationChecks(
      [
        'Run the tests and the CLI.',
        '```sh',
        'npm test',
        '```',
        '',
        '```bash',
        'cd tools',
        'node cli.js --version | grep -q 1.0',
        '```',
        '~~~shell',
        'make lint',
        '~~~',
        '- `node cli.js bob`',
        '* `npm run build` — the bundle builds',
        '1. `git diff --exit-code -- package-lock.json`: the lock file is untouched',
        '- [ ] `true` (always)',
      ].join('\n'),
    );
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.notes, []);
    assert.deepEqual(parsed.checks.map(what), [
      ['command', 'npm test'],
      ['command', 'cd tools\nnode cli.js --version | grep -q 1.0'],
      ['command', 'make lint'],
      ['command', 'node cli.js bob'],
      ['command', 'npm run build'],
      ['command', 'git diff --exit-code -- package-lock.json'],
      ['command', 'true'],
    ]);
    assert.deepEqual(
      parsed.checks.map((c) => [c.id, c.label, c.number]),
      [
        ['plan-1', 'check 1: npm test', 1],
        ['plan-2', 'check 2: cd tools …', 2],
        ['plan-3', 'check 3: make lint', 3],
        ['plan-4', 'check 4: node cli.js bob', 4],
        ['plan-5', 'check 5: npm run build', 5],
        ['plan-6', 'check 6: git diff --exit-code -- package-lock.json', 6],
        ['plan-7', 'check 7: true', 7],
      ],
    );
    assert.equal(parsed.checks[0]!.origin, 'the ```sh block at line 2 of the Verification part');
    assert.equal(parsed.checks[3]!.origin, 'line 13 of the Verification part');
    assert.deepEqual(parsed.checks[0]!.scope, { kind: 'plan' });
  });

  it('never runs prose, other languages, plain list lines or code spans followed by words (noted)', () => {
    const parsed = parseVerificationChecks(
      [
        'All tests pass: `npm test`.',
        '- the CLI prints hello',
        '```ts',
        'assert.equal(1, 1)',
        '```',
        '```',
        'npm test',
        '```',
        '- `README.md` mentions the usage',
        '```md',
        '- `inside a fence` is not a list line',
        '```',
      ].join('\n'),
    );
    assert.deepEqual(parsed.checks, []);
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.notes, [
      'The fenced block at line 6 of the Verification part has no language, so Forge does not run it; mark it ```sh to make it a check.',
      'Line 9 of the Verification part: `README.md` is followed by text, so Forge does not run it as a check; to run it, put the command alone on its line (a description may follow after " — ").',
    ]);
  });

  it('reads file assertions: exists, contains, matches (paths canonical, text and regex trimmed or as a code span)', () => {
    const parsed = parseVerificationChecks(
      [
        '- exists: src/cli.ts',
        '- exists: `./docs//guide/`',
        '- contains: README.md: ## Usage',
        '- Contains: README.md: ` two spaces  `',
        '- contains: `odd:name.txt`: a: b',
        '- matches: src/cli.ts: /^export function main\\(/m',
        '- matches: CHANGELOG.md: `/## \\[Unreleased\\]/i`',
      ].join('\n'),
    );
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.checks.map(what), [
      ['exists', 'src/cli.ts'],
      ['exists', 'docs/guide'],
      ['contains', 'README.md', '## Usage'],
      ['contains', 'README.md', 'two spaces '],
      ['contains', 'odd:name.txt', 'a: b'],
      ['matches', 'src/cli.ts', '^export function main\\(', 'm'],
      ['matches', 'CHANGELOG.md', '## \\[Unreleased\\]', 'i'],
    ]);
    assert.deepEqual(
      parsed.checks.map((c) => c.label),
      [
        'check 1: exists: src/cli.ts',
        'check 2: exists: docs/guide',
        'check 3: contains: README.md: "## Usage"',
        'check 4: contains: README.md: "two spaces "',
        'check 5: contains: odd:name.txt: "a: b"',
        'check 6: matches: src/cli.ts: /^export function main\\(/m',
        'check 7: matches: CHANGELOG.md: /## \\[Unreleased\\]/i',
      ],
    );
  });

  it('keeps the spaces inside a code span that only pads it on one side (CommonMark strips one space only on both sides)', () => {
    assert.deepEqual(readCodeSpan('` a `'), { content: 'a', after: '' });
    assert.deepEqual(readCodeSpan('`` echo `date` `` — why'), { content: 'echo `date`', after: ' — why' });
    assert.deepEqual(readCodeSpan('`  `'), { content: '  ', after: '' });
    assert.equal(readCodeSpan('`never closed'), null);
  });

  it('counts Verify: lines in the Verification part too, and a command with backticks inside a double code span', () => {
    const parsed = parseVerificationChecks(['Verify: npm test', 'verify: exists: dist/cli.cjs', '- ``echo `date` ``'].join('\n'));
    assert.deepEqual(parsed.checks.map(what), [
      ['command', 'npm test'],
      ['exists', 'dist/cli.cjs'],
      ['command', 'echo `date`'],
    ]);
  });

  it('keeps a repeated check once and notes it (whitespace at line ends and list vs block spelling do not matter)', () => {
    const parsed = parseVerificationChecks(['```sh', 'npm test  ', '```', '- `npm test`', '- exists: a.txt', '- exists: ./a.txt', '- `npm  test`'].join('\n'));
    assert.deepEqual(parsed.checks.map(what), [
      ['command', 'npm test'],
      ['exists', 'a.txt'],
      ['command', 'npm  test'],
    ]);
    assert.deepEqual(parsed.checks.map((c) => c.id), ['plan-1', 'plan-2', 'plan-3']);
    assert.deepEqual(parsed.notes, [
      'Line 4 of the Verification part repeats check 1: npm test (the ```sh block at line 1 of the Verification part); Forge runs it once.',
      'Line 6 of the Verification part repeats check 2: exists: a.txt (line 5 of the Verification part); Forge runs it once.',
    ]);
  });

  it('gives the same check the same key wherever it stands, and different checks different keys', () => {
    const a = parseVerificationChecks('- `npm test`\n- exists: x');
    const b = parseVerificationChecks('- exists: ./x\n```bash\nnpm test\n```');
    assert.equal(a.checks[0]!.key, b.checks[1]!.key);
    assert.equal(a.checks[1]!.key, b.checks[0]!.key);
    assert.notEqual(a.checks[0]!.key, a.checks[1]!.key);
    const contains = parseVerificationChecks('- contains: a: b\n- contains: a:b c\n- exists: a');
    assert.equal(new Set(contains.checks.map((c) => c.key)).size, 3);
  });

  it('shortens a long command in its label but keeps the command whole', () => {
    const long = `echo ${'x'.repeat(100)}`;
    const parsed = parseVerificationChecks(`- \`${long}\``);
    assert.equal(parsed.checks[0]!.kind === 'command' && parsed.checks[0]!.command, long);
    assert.equal(parsed.checks[0]!.label, `check 1: ${long.slice(0, 59)}…`);
  });

  it('has no checks for a plan without a Verification part, and reads the part parsePlan extracts', () => {
    assert.deepEqual(parseVerificationChecks(null), { checks: [], problems: [], notes: [] });
    const plan = parsePlan('# T\n## Build it\nVerify: npm run build\n## Verification\n```sh\nnpm test\n```\n- exists: dist/cli.cjs');
    assert.deepEqual(parseVerificationChecks(plan.verification).checks.map(what), [
      ['command', 'npm test'],
      ['exists', 'dist/cli.cjs'],
    ]);
    assert.deepEqual(parseSectionChecks(plan.sections[0]!).checks.map(what), [['command', 'npm run build']]);
  });
});

describe('checks: refusing what cannot run, with what is wrong and how to fix it', () => {
  const cases: Array<[string, string, string]> = [
    ['an empty block', '```sh\n\n```', 'the command is empty: write the command to run in it, or remove the block'],
    ['a block of comments only', '```bash\n# npm test\n```', 'the command is empty: write the command to run in it, or remove the block'],
    ['an empty code span', '- ``', 'the command is empty: write the command to run between the backticks, e.g. `npm test`'],
    ['a blank code span', '- `  `', 'the command is empty: write the command to run between the backticks, e.g. `npm test`'],
    ['an unclosed code span', '- `npm test', 'the code span is never closed: end the command with a backtick'],
    ['an empty Verify line', 'Verify:', 'the command is empty: write the command after "Verify:", e.g. Verify: npm test'],
    ['an unclosed sh block', 'x\n```sh\nnpm test', 'the block is never closed: end it with a line holding only ```'],
    [
      'an absolute path',
      '- exists: /etc/passwd',
      'the path "/etc/passwd" is absolute; Forge checks files inside the loop\'s worktree only: write it relative to the repository root (e.g. src/cli.ts)',
    ],
    [
      'a path leaving through ..',
      '- contains: ../other/README.md: x',
      'the path "../other/README.md" leaves the worktree through ".."; Forge checks files inside the loop\'s worktree only: write a path inside the repository',
    ],
    [
      'a path leaving through .. in its middle',
      '- exists: src/../../x',
      'the path "src/../../x" leaves the worktree through ".."; Forge checks files inside the loop\'s worktree only: write a path inside the repository',
    ],
    ['a home path', '- exists: ~/.ssh/id_rsa', 'the path "~/.ssh/id_rsa" names your home folder; Forge checks files inside the loop\'s worktree only: write it relative to the repository root'],
    ['an empty path', '- exists:', 'the path is empty: name a file relative to the repository root, e.g. src/cli.ts'],
    ['contains without text', '- contains: README.md', '"contains" needs a path and a text separated by ":", e.g. contains: README.md: ## Usage'],
    ['contains with empty text', '- contains: README.md:  ', 'the text to look for is empty: write it after the path, e.g. contains: README.md: ## Usage'],
    ['exists with more', '- exists: a.txt: b', '"exists" takes only a path, but "a.txt: b" has more after a ":"; write the path as a code span if it holds a ":"'],
    ['a regex without slashes', '- matches: a.txt: foo', '"foo" is not a regular expression written /REGEX/FLAGS, e.g. matches: README.md: /^## Usage$/m'],
    ['a bad regex', '- matches: a.txt: /a(b/', '/a(b/ is not a valid regular expression (/a(b/: Unterminated group): fix the expression'],
    ['a stateful flag', '- matches: a.txt: /a/g', 'the flags "g" of /a/g are not allowed: use each of i, m, s, u at most once'],
    ['a repeated flag', '- matches: a.txt: /a/ii', 'the flags "ii" of /a/ii are not allowed: use each of i, m, s, u at most once'],
    ['a path span then no colon', '- contains: `a.txt` b', 'after the path `a.txt` comes "b"; separate the path from what follows with ":"'],
  ];
  for (const [name, text, message] of cases) {
    it(`refuses ${name}`, () => {
      const parsed = parseVerificationChecks(text);
      assert.deepEqual(parsed.checks, []);
      assert.deepEqual(
        parsed.problems.map((p) => p.message),
        [message],
      );
    });
  }

  it('names where each problem was written and lists them all in one message', () => {
    const parsed = parseVerificationChecks('- `npm test`\n- exists: /etc\n```sh\n```');
    assert.equal(parsed.checks.length, 1);
    assert.equal(
      describeCheckProblems(parsed, 'The plan\'s Verification part'),
      [
        'The plan\'s Verification part has 2 checks Forge cannot run:',
        '- line 2 of the Verification part: the path "/etc" is absolute; Forge checks files inside the loop\'s worktree only: write it relative to the repository root (e.g. src/cli.ts)',
        '- the ```sh block at line 3 of the Verification part: the command is empty: write the command to run in it, or remove the block',
      ].join('\n'),
    );
    assert.equal(describeCheckProblems(parseVerificationChecks('- `true`'), 'x'), null);
  });
});

describe('checks: a section\'s Verify: lines', () => {
  it('reads only Verify: lines (plain, code span, file assertion), never the section\'s code or lists', () => {
    const parsed = parseSectionChecks({
      index: 2,
      body: [
        'Write the parser.',
        '```sh',
        'rm -rf build',
        'Verify: inside a fence is not a check',
        '```',
        '- `npm run gen`',
        'Verify: npm test -- --grep parser',
        '- Verify: `node -e "require(\'./dist\')"` — loads',
        'VERIFY: contains: src/parser.ts: export function parse',
      ].join('\n'),
    });
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.checks.map(what), [
      ['command', 'npm test -- --grep parser'],
      ['command', 'node -e "require(\'./dist\')"'],
      ['contains', 'src/parser.ts', 'export function parse'],
    ]);
    assert.deepEqual(
      parsed.checks.map((c) => [c.id, c.label]),
      [
        ['section-3-1', 'section 3 check 1: npm test -- --grep parser'],
        ['section-3-2', 'section 3 check 2: node -e "require(\'./dist\')"'],
        ['section-3-3', 'section 3 check 3: contains: src/parser.ts: "export function parse"'],
      ],
    );
    assert.deepEqual(parsed.checks[0]!.scope, { kind: 'section', index: 2 });
    assert.equal(parsed.checks[0]!.origin, 'line 7 of section 3');
  });

  it('has no checks without Verify: lines', () => {
    assert.deepEqual(parseSectionChecks({ index: 0, body: '```sh\nnpm test\n```\n- `x`' }), { checks: [], problems: [], notes: [] });
  });
});

describe('checks: a goal\'s options', () => {
  it('turns --check, --exists, --contains and --matches into the same specs', () => {
    const parsed = parseGoalCheckOptions({
      check: ['npm test', 'node cli.js --version'],
      exists: ['dist/cli.cjs'],
      contains: ['README.md:## Usage', 'README.md: spaced '],
      matches: ['src/a.ts:/^export /m'],
    });
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.checks.map(what), [
      ['command', 'npm test'],
      ['command', 'node cli.js --version'],
      ['exists', 'dist/cli.cjs'],
      ['contains', 'README.md', '## Usage'],
      ['contains', 'README.md', 'spaced'],
      ['matches', 'src/a.ts', '^export ', 'm'],
    ]);
    assert.deepEqual(
      parsed.checks.map((c) => c.id),
      ['goal-1', 'goal-2', 'goal-3', 'goal-4', 'goal-5', 'goal-6'],
    );
    assert.equal(parsed.checks[0]!.label, 'check 1: npm test');
    assert.equal(parsed.checks[0]!.origin, '--check option 1');
    assert.equal(parsed.checks[3]!.origin, '--contains "README.md:## Usage"');
    assert.deepEqual(parsed.checks[0]!.scope, { kind: 'goal' });
  });

  it('refuses an empty --check, a --contains outside the worktree or without a text, and notes a repeated --check', () => {
    const parsed = parseGoalCheckOptions({
      check: ['npm test', '  ', 'npm test'],
      contains: ['/etc/passwd:root', '../x:y', 'README.md'],
      exists: ['..'],
    });
    assert.deepEqual(parsed.checks.map(what), [['command', 'npm test']]);
    assert.deepEqual(
      parsed.problems.map((p) => `${p.origin}: ${p.message}`),
      [
        '--check option 2: the command is empty: give --check the command to run, e.g. --check "npm test"',
        '--exists "..": the path ".." leaves the worktree through ".."; Forge checks files inside the loop\'s worktree only: write a path inside the repository',
        '--contains "/etc/passwd:root": the path "/etc/passwd" is absolute; Forge checks files inside the loop\'s worktree only: write it relative to the repository root (e.g. src/cli.ts)',
        '--contains "../x:y": the path "../x" leaves the worktree through ".."; Forge checks files inside the loop\'s worktree only: write a path inside the repository',
        '--contains "README.md": "contains" needs a path and a text separated by ":", e.g. contains: README.md: ## Usage',
      ],
    );
    assert.deepEqual(parsed.notes, ['--check option 3 repeats check 1: npm test (--check option 1); Forge runs it once.']);
  });

  it('has no checks without options', () => {
    assert.deepEqual(parseGoalCheckOptions({}), { checks: [], problems: [], notes: [] });
  });
});

describe('checks: worktree paths', () => {
  const table: Array<[string, string | null]> = [
    ['src/a.ts', 'src/a.ts'],
    ['./src//a.ts', 'src/a.ts'],
    ['src/', 'src'],
    ['.', '.'],
    ['./', '.'],
    ['a/b/../c', 'a/c'],
    ['a/..', '.'],
    ['..', null],
    ['../a', null],
    ['a/../../b', null],
    ['/abs', null],
    ['C:\\x', null],
    ['~', null],
    ['', null],
    ['a\0b', null],
    ['..foo', '..foo'],
  ];
  for (const [written, expected] of table) {
    it(`"${written.replace('\0', '\\0')}" → ${expected ?? 'refused'}`, () => {
      const result = normaliseWorktreePath(written);
      if (expected === null) assert.ok('error' in result, JSON.stringify(result));
      else assert.deepEqual(result, { path: expected });
    });
  }
});
