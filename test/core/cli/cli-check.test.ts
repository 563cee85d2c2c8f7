/**
 * `forge check PLAN.md` and the validation `forge run` does before it starts, through the built
 * CLI as real processes. `check` is read-only (no data folder is created); `run` prints the
 * warnings and refuses a plan with errors before anything (worktree, branch, database) exists.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';

describe('forge check, and the plan validation of forge run', function () {
  this.timeout(120_000);
  let repo: TestRepository;
  let work: string;
  let dataDir: string;
  let runner: CliRunner;

  before(async () => {
    const cliPath = ensureCliBuilt(REPO_ROOT);
    repo = await createTestRepository({ 'README.md': '# check\n', 'tsconfig.json': '{}\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-check-'));
    dataDir = join(work, 'data');
    runner = createCliRunner({ cliPath, env: {}, commonArgs: ['--data-dir', dataDir, '--repo', repo.dir] });
  });

  after(async () => {
    await runner?.killAll();
    await repo?.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  async function planFile(name: string, text: string): Promise<string> {
    const file = join(work, name);
    await writeFile(file, text);
    return file;
  }

  it('a good plan: exit 0, "ready to run", nothing written', async () => {
    const file = await planFile('good.md', '# Good\n\n## Write a.js\nCreate a.js.\n\n## Verification\n- `node a.js`\n- `npx tsc -p tsconfig.json`\n');
    const r = await runner.run(['check', file]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `${file}: 1 section, 0 errors, 0 warnings; ready to run.`);
    assert.equal(r.stderr, '');
    assert.equal(existsSync(dataDir), false, 'forge check opens no data folder');
  });

  it('warnings (file:line), still exit 0; --json lists them with 1-based lines', async () => {
    const text = ['# Warned', 'Loop Name: My Thing', '## Empty', '', '## Verification', '- `node scripts/missing.mjs`'].join('\n');
    const file = await planFile('warned.md', text);
    const r = await runner.run(['check', file]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:2: warning: "Loop Name: My Thing" will be used as "my-thing"`));
    assert.match(lines[1]!, /:3: warning: Section 1 "Empty" has no body/);
    assert.match(lines[2]!, /:6: warning: check 1: node scripts\/missing\.mjs names "scripts\/missing\.mjs", which is not in the repository/);
    assert.match(lines[3]!, /: 1 section, 0 errors, 3 warnings; ready to run\.$/);
    const json = await runner.run(['check', file, '--json']);
    assert.equal(json.code, 0);
    const report = JSON.parse(json.stdout) as { errors: number; warnings: number; sections: number; problems: { line: number; code: string; severity: string }[] };
    assert.deepEqual(
      { errors: report.errors, warnings: report.warnings, sections: report.sections },
      { errors: 0, warnings: 3, sections: 1 },
    );
    assert.deepEqual(report.problems.map((p) => [p.line, p.code]), [[2, 'loop-name-changed'], [3, 'empty-section'], [6, 'missing-file']]);
  });

  it('errors: exit 2; forge run refuses the same plan before creating anything', async () => {
    const sections = Array.from({ length: 30 }, (_, i) => `## Step ${i + 1}\nDo step ${i + 1}.`).join('\n');
    const file = await planFile('thirty.md', `# Thirty\nLoop Name: thirty\n${sections}\n## Verification\n- \`true\`\n`);
    const check = await runner.run(['check', file]);
    assert.equal(check.code, 2, check.stderr);
    assert.match(check.stdout, /:51: error: The plan has 30 sections; Forge runs at most 24\. Sections 25–30/);
    assert.match(check.stdout, /1 error, 0 warnings; forge run refuses it until the errors are fixed\./);
    const run = await runner.run(['run', file]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /^forge: .*thirty\.md:51: error: The plan has 30 sections/m);
    assert.match(run.stderr, /thirty\.md has an error \(above\); fix it and run again\. "forge check .*thirty\.md" checks a plan without running it\./);
    assert.equal((await repo.git('branch', '--list', 'forge/*')).trim(), '', 'no loop branch');
  });

  it('a Verification part that runs nothing is a warning; forge run --dry-run validates as forge check does (issue 28)', async () => {
    const prose = await planFile('prose.md', '# Prose\n\n## Write a.js\nCreate a.js.\n\n## Verification\n`node a.js` prints `ok`.\n\n```\nnode a.js\n```\n');
    const r = await runner.run(['check', prose]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /prose\.md:6: warning: The "## Verification" part names no check Forge can run/);
    assert.match(r.stdout, /prose\.md:9: warning: The fenced block at line 3 of the Verification part has no language/);
    assert.match(r.stdout, /1 section, 0 errors, 2 warnings; ready to run\.$/m);

    const outside = await planFile('outside.md', '# Outside\n\n## Write a.js\nCreate a.js.\n\n## Verification\n- exists: ../../etc/passwd\n');
    const check = await runner.run(['check', outside]);
    assert.equal(check.code, 2, check.stdout);
    const dry = await runner.run(['run', outside, '--dry-run']);
    assert.equal(dry.code, 2, `${dry.stdout}\n${dry.stderr}`);
    assert.match(dry.stderr, /outside\.md:7: error: .*\.\.\/\.\.\/etc\/passwd/);
    assert.doesNotMatch(dry.stdout, /dry run/);
  });

  it('an unreadable plan and a missing file: exit 2 with the reason', async () => {
    const empty = await planFile('empty.md', '\n\n');
    const r = await runner.run(['check', empty]);
    assert.equal(r.code, 2);
    assert.match(r.stdout, /empty\.md:1: error: .*empty\.md is empty/);
    const missing = await runner.run(['check', join(work, 'nope.md')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^forge: Plan file .*nope\.md does not exist\./);
  });
});
