import assert from 'node:assert/strict';
import { filesNamedBy, formatPlanProblem, looksLikePlanFile, planProblemCounts, validatePlan, type PlanProblem } from '../../../src/core/loop/plan-validation';
import { parseVerificationChecks } from '../../../src/core/checks/parse';

const GOOD = [
  '# Greeting',
  '',
  'Loop Name: greeting',
  '',
  '## Objective',
  'A greeting module.',
  '',
  '## Write greet.js',
  'Create greet.js exporting greet(name).',
  '',
  '## Test it',
  'Add test/greet.test.js.',
  '',
  '## Verification',
  '- `node test/greet.test.js`',
  '- contains: greet.js: export',
].join('\n');

const codes = (problems: PlanProblem[]) => problems.map((p) => `${p.severity}:${p.code}@${p.line}`);

describe('plan validation (pure)', () => {
  it('finds nothing wrong in a good plan, even with the files it names still to be created', () => {
    const v = validatePlan(GOOD, { pathExists: () => false });
    assert.deepEqual(v.problems, []);
    assert.equal(v.plan?.sections.length, 2);
  });

  it('an unreadable plan is one error on line 1 and no plan', () => {
    for (const text of ['', '   \n<!-- nothing -->\n', 'a\u0000b']) {
      const v = validatePlan(text, { source: 'p.md' });
      assert.equal(v.plan, null);
      assert.deepEqual(codes(v.problems), ['error:unreadable@0']);
      assert.match(v.problems[0]!.message, /^p\.md (is empty|looks like a binary file)/);
    }
  });

  it('more sections than Forge runs is an error on the first section that would not run, naming them', () => {
    const sections = Array.from({ length: 30 }, (_, i) => `## Step ${i + 1}\nDo thing ${i + 1}.\n`);
    const text = ['# Big', '', ...sections, '## Verification', '- `true`'].join('\n');
    const v = validatePlan(text);
    const cap = v.problems.find((p) => p.code === 'too-many-sections')!;
    assert.equal(cap.severity, 'error');
    assert.equal(text.split('\n')[cap.line], '## Step 25');
    assert.match(cap.message, /30 sections; Forge runs at most 24\. Sections 25–30 \("Step 25", .*"Step 30"\) would not run/);
    assert.deepEqual(planProblemCounts(v.problems), { errors: 1, warnings: 0 });
  });

  it('25 sections names the one section that would not run', () => {
    const sections = Array.from({ length: 25 }, (_, i) => `## S${i + 1}\nx\n`);
    const v = validatePlan(['# P', ...sections, '## Verification', '- `true`'].join('\n'));
    assert.match(v.problems[0]!.message, /Section 25 \("S25"\) would not run/);
  });

  it('a section with no body is a warning on its heading', () => {
    const text = ['# P', '## First', '', '## Second', 'Body.', '## Verification', '- `true`'].join('\n');
    assert.deepEqual(codes(validatePlan(text).problems), ['warning:empty-section@1']);
  });

  it('duplicate section titles (any case) warn on the later one', () => {
    const text = ['# P', '## Build', 'a', '## Test', 'b', '## build', 'c', '## Verification', '- `true`'].join('\n');
    const v = validatePlan(text);
    assert.deepEqual(codes(v.problems), ['warning:duplicate-section-title@5']);
    assert.match(v.problems[0]!.message, /Section 3 has the same title as section 1/);
  });

  it('a missing Verification part warns on line 1; an empty one warns on its heading', () => {
    assert.deepEqual(codes(validatePlan('# P\n## A\nbody').problems), ['warning:no-verification@0']);
    assert.deepEqual(codes(validatePlan('# P\n## A\nbody\n## Verification\n\n').problems), ['warning:empty-verification@3']);
    // "Acceptance criteria" counts as the Verification part.
    assert.deepEqual(validatePlan('# P\n## A\nbody\n## Acceptance criteria\n- `true`').problems, []);
  });

  it('a Verification part that runs nothing warns: prose only, a fence without a language (issue 28)', () => {
    assert.deepEqual(codes(validatePlan('# P\n## A\nbody\n## Verification\n`node test.js` prints `ok`.').problems), ['warning:no-runnable-check@3']);
    const fence = validatePlan('# P\n## A\nbody\n## Verification\nRun this:\n```\nnode test.js\n```\n').problems;
    assert.deepEqual(codes(fence), ['warning:no-runnable-check@3', 'warning:unrun-block@5']);
    assert.match(fence[1]!.message, /no language.*```sh/);
    // A section's Verify: line is a check the final gate runs too: nothing to warn about.
    assert.deepEqual(codes(validatePlan('# P\n## A\nbody\nVerify: `true`\n## Verification\nAll good when the tests pass.').problems), []);
  });

  it('a Loop Name that will be changed says what it becomes; one with nothing usable says so', () => {
    const changed = validatePlan('# P\n\nLoop Name: My Feature!\n## A\nx\n## Verification\n- `true`');
    assert.deepEqual(codes(changed.problems), ['warning:loop-name-changed@2']);
    assert.match(changed.problems[0]!.message, /will be used as "my-feature" \(branch forge\/my-feature\)/);
    const unusable = validatePlan('# P\nLoop Name: !!!\n## A\nx\n## Verification\n- `true`');
    assert.match(unusable.problems[0]!.message, /nothing Forge can use/);
    assert.deepEqual(validatePlan('# P\nLoop Name: fine-name\n## A\nx\n## Verification\n- `true`').problems, []);
  });

  it('checks Forge cannot run are errors on their own line (Verification part and section Verify: lines)', () => {
    const text = ['# P', '## A', 'Do it.', 'Verify: matches: a.txt: /x/g', '## Verification', '', '- ``', '- exists: ../outside'].join('\n');
    const v = validatePlan(text);
    const lines = text.split('\n');
    const found = v.problems.filter((p) => p.code === 'check-problem');
    assert.equal(found.length, 3, JSON.stringify(v.problems));
    assert.ok(found.every((p) => p.severity === 'error'));
    assert.deepEqual(found.map((p) => lines[p.line]), ['Verify: matches: a.txt: /x/g', '- ``', '- exists: ../outside']);
  });

  it('files named by checks that are missing and that no section mentions are warnings on the check\'s line', () => {
    const text = ['# P', '## A', 'Change src/app.ts.', '## Verification', '- `node scripts/verify.mjs && npx tsc -p tsconfig.json`', '- contains: docs/guide.md: Usage', '- `node src/app.ts`'].join('\n');
    const existing = new Set(['tsconfig.json']);
    const v = validatePlan(text, { pathExists: (p) => existing.has(p) });
    assert.deepEqual(
      v.problems.map((p) => [p.code, p.line, /names "([^"]+)"/.exec(p.message)?.[1]]),
      [
        ['missing-file', 4, 'scripts/verify.mjs'],
        ['missing-file', 5, 'docs/guide.md'],
      ],
    );
    // Without a way to look, nothing is claimed about files.
    assert.deepEqual(validatePlan(text).problems, []);
  });

  it('problems come in line order, errors before warnings on one line', () => {
    const text = ['# P', 'Loop Name: Bad Name', '## A', '', '## A', 'x'].join('\n');
    const lines = validatePlan(text).problems.map((p) => p.line);
    assert.deepEqual(lines, [...lines].sort((a, b) => a - b));
  });

  it('formats problems as file:line: severity: message, 1-based', () => {
    assert.equal(formatPlanProblem('plan.md', { severity: 'warning', code: 'no-verification', message: 'm', line: 0 }), 'plan.md:1: warning: m');
  });
});

describe('files named by a check', () => {
  const first = (verification: string) => parseVerificationChecks(verification).checks[0]!;
  it('takes relative paths with a folder or a known extension from commands', () => {
    assert.deepEqual(filesNamedBy(first('- `node test/a.test.js --flag x.json`')), ['test/a.test.js', 'x.json']);
    assert.deepEqual(filesNamedBy(first('- `bash ./run.sh`')), ['run.sh']);
    assert.deepEqual(filesNamedBy(first('- `python3 "tools/check.py"`')), ['tools/check.py']);
  });
  it('leaves out programs, options, globs, variables, URLs, absolute and parent paths', () => {
    assert.deepEqual(filesNamedBy(first('- `npm test -- --grep foo.ts=1`')), []);
    assert.deepEqual(filesNamedBy(first('- `ls src/*.ts $HOME/x.js /etc/passwd ../up.js https://a.b/c.js src/`')), []);
  });
  it('takes the path of contains/matches assertions, not of exists ones (those are often what a section creates)', () => {
    assert.deepEqual(filesNamedBy(first('- contains: README.md: Usage')), ['README.md']);
    assert.deepEqual(filesNamedBy(first('- matches: a/b.txt: /x/')), ['a/b.txt']);
    assert.deepEqual(filesNamedBy(first('- exists: dist/out.js')), []);
  });
});

describe('which markdown files the editor treats as plans', () => {
  it('by name: plan.md, PLAN.md, feature-plan.md, files in a plans/ folder', () => {
    for (const f of ['/r/plan.md', '/r/PLAN.md', '/r/feature-plan.md', '/r/plans/x.md', 'C:\\r\\plans\\y.md', '/r/my_plan.markdown']) assert.equal(looksLikePlanFile(f, 'text'), true, f);
  });
  it('by content: Loop Name, the section marker, an Objective or Verification part', () => {
    assert.equal(looksLikePlanFile('/r/notes.md', '# X\nLoop Name: x\n'), true);
    assert.equal(looksLikePlanFile('/r/notes.md', '# X\n<!-- forge-section -->\n## A\n'), true);
    assert.equal(looksLikePlanFile('/r/notes.md', '# X\n## Verification\n- `npm test`\n'), true);
    assert.equal(looksLikePlanFile('/r/README.md', '# X\n## Verification\n'), false, 'a README is not a plan unless it names a loop');
    assert.equal(looksLikePlanFile('/r/README.md', '# X\nLoop Name: x\n'), true);
  });
  it('not: other markdown, other file types, words that only contain "plan"', () => {
    assert.equal(looksLikePlanFile('/r/docs/guide.md', '# Guide\n## Install\n'), false);
    assert.equal(looksLikePlanFile('/r/plan.txt', 'Loop Name: x'), false);
    assert.equal(looksLikePlanFile('/r/planet.md', '# Mars'), false);
    assert.equal(looksLikePlanFile('/r/explanation.md', '# Why'), false);
  });
});
