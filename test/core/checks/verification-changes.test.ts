import { strict as assert } from 'node:assert';
import { parseVerificationChecks } from '../../../src/core/checks/parse';
import { allowsVerificationChanges, detectVerificationChanges, isTestPath, makeRule, type ChangedPath } from '../../../src/core/checks/verification-changes';

const pkg = (scripts: Record<string, string>) => JSON.stringify({ name: 'x', scripts });
const MAKEFILE = 'CC=cc\n\nall: build\n\tcc -o x x.c\n\ncheck: all\n\t./x --self-test\n\n.PHONY: all check\n';

/** The changes a branch makes, given the checks (as Verification lines), the changed files and the manifests at base and now. */
function detect(verification: string, changed: ChangedPath[], files: Record<string, [string | null, string | null]> = {}): string[] {
  const parsed = parseVerificationChecks(verification);
  assert.deepEqual(parsed.problems, []);
  return detectVerificationChanges({
    checks: parsed.checks,
    changed,
    textAt: (path) => ({ base: files[path]?.[0] ?? null, now: files[path]?.[1] ?? null }),
  }).map((c) => `${c.file}: ${c.what}`);
}

describe('verification changes: what a branch changed of what the checks run (pure)', () => {
  it('a package.json script a check runs: npm test, npm t, npm run x, yarn x, pnpm run x, with pre/post scripts', () => {
    const files = { 'package.json': [pkg({ test: 'node test.js', lint: 'eslint .', pretest: 'tsc' }), pkg({ test: 'exit 0', lint: 'true', pretest: 'tsc' })] as [string, string] };
    const changed = [{ status: 'M', path: 'package.json' }];
    for (const command of ['npm test', 'npm t', 'npm run test', 'npm run-script test --silent', 'yarn test', 'pnpm test', 'pnpm run test', 'CI=1 npm test', 'cd . && npm test']) {
      assert.deepEqual(detect(`- \`${command}\``, changed, files), ['package.json: the package.json script "test", which check 1: ' + command + ' runs, changed from "node test.js" to "exit 0"'], command);
    }
    assert.deepEqual(detect('- `npm run lint`', changed, files), ['package.json: the package.json script "lint", which check 1: npm run lint runs, changed from "eslint ." to "true"']);
    const pre = { 'package.json': [pkg({ test: 'node t.js' }), pkg({ test: 'node t.js', pretest: 'exit 0' })] as [string, string] };
    assert.deepEqual(detect('- `npm test`', changed, pre), ['package.json: the package.json script "pretest", which check 1: npm test runs, was added']);
    const removed = { 'package.json': [pkg({ test: 'node t.js' }), pkg({})] as [string, string] };
    assert.deepEqual(detect('- `npm test`', changed, removed), ['package.json: the package.json script "test", which check 1: npm test runs, was removed (it was "node t.js")']);
  });

  it('leaves alone what no check runs: another script, an unchanged one, a manifest nobody invokes, a new dependency', () => {
    const files = { 'package.json': [pkg({ test: 'node test.js', build: 'tsc' }), JSON.stringify({ name: 'x', scripts: { test: 'node test.js', build: 'esbuild' }, dependencies: { a: '1' } })] as [string, string] };
    const changed = [{ status: 'M', path: 'package.json' }];
    assert.deepEqual(detect('- `npm test`', changed, files), []);
    assert.deepEqual(detect('- `node test.js`', changed, files), []);
    assert.deepEqual(detect('- `npm install`', changed, files), []);
  });

  it('a Makefile target a check runs, the default target for a bare make', () => {
    const weakened = MAKEFILE.replace('\t./x --self-test', '\ttrue');
    const files = { Makefile: [MAKEFILE, weakened] as [string, string] };
    const changed = [{ status: 'M', path: 'Makefile' }];
    assert.deepEqual(detect('- `make check`', changed, files), ['Makefile: the target "check" of Makefile, which check 1: make check runs, changed']);
    assert.deepEqual(detect('- `make -j2 all`', changed, files), []);
    assert.deepEqual(detect('- `make`', changed, { Makefile: [MAKEFILE, MAKEFILE.replace('\tcc -o x x.c', '\ttouch x')] }), ['Makefile: the default target of Makefile, which check 1: make runs, changed']);
    assert.equal(makeRule(MAKEFILE, ''), 'all: build\n\tcc -o x x.c');
    assert.equal(makeRule(MAKEFILE, 'nope'), null);
  });

  it('a file a command check names, modified, deleted or renamed; a new one is free', () => {
    assert.deepEqual(detect('- `node test.js`', [{ status: 'M', path: 'test.js' }]), ['test.js: test.js, which check 1: node test.js names, was modified']);
    assert.deepEqual(detect('- `bash ./scripts/verify.sh --all`', [{ status: 'D', path: 'scripts/verify.sh' }]), ['scripts/verify.sh: scripts/verify.sh, which check 1: bash ./scripts/verify.sh --all names, was deleted']);
    assert.deepEqual(detect('- `python check.py`', [{ status: 'R', path: 'old.py', oldPath: 'check.py' }]), ['check.py: check.py, which check 1: python check.py names, was renamed to old.py']);
    assert.deepEqual(detect('- `node test.js`', [{ status: 'A', path: 'test.js' }]), []);
    // A file assertion's file is the work itself: changing it is what the plan asks.
    assert.deepEqual(detect('- contains: README.md: ## Usage', [{ status: 'M', path: 'README.md' }]), []);
  });

  it('test files and test configuration that existed at the base; adding tests is free', () => {
    const changed: ChangedPath[] = [
      { status: 'M', path: 'test/add.test.js' },
      { status: 'D', path: 'tests/test_math.py' },
      { status: 'R', path: 'src/skip.js', oldPath: 'src/add.spec.ts' },
      { status: 'M', path: '.mocharc.json' },
      { status: 'A', path: 'test/new.test.js' },
      { status: 'M', path: 'src/add.js' },
    ];
    assert.deepEqual(detect('- `npm test`', changed), [
      "test/add.test.js: test/add.test.js, a test file that existed at the loop's base, was modified",
      "tests/test_math.py: tests/test_math.py, a test file that existed at the loop's base, was deleted",
      "src/add.spec.ts: src/add.spec.ts, a test file that existed at the loop's base, was renamed to src/skip.js",
      ".mocharc.json: .mocharc.json, a test file that existed at the loop's base, was modified",
    ]);
  });

  it('knows test paths by convention', () => {
    for (const p of ['test/a.js', 'tests/x.py', 'src/__tests__/a.ts', 'a.test.ts', 'a_test.go', 'test_a.py', 'pkg/FooTest.java', 'conftest.py', 'jest.config.js', 'pytest.ini', 'spec/a_spec.rb']) assert.equal(isTestPath(p), true, p);
    for (const p of ['src/add.js', 'latest.js', 'contest.py', 'README.md', 'testing.md', 'package.json']) assert.equal(isTestPath(p), false, p);
  });

  it('a plan allows changes with a line "Allow verification changes" in its Verification part', () => {
    assert.equal(allowsVerificationChanges('- `npm test`\n- Allow verification changes: the old test was wrong\n'), true);
    assert.equal(allowsVerificationChanges('Allow verification changes'), true);
    assert.equal(allowsVerificationChanges('- `npm test`\nThe verification must not change.'), false);
    assert.equal(allowsVerificationChanges(null), false);
  });
});
