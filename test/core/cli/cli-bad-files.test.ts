/**
 * Bad files and folders given to the built `forge` CLI as real processes (issue 28 item 7): each
 * ends with exit 2 and one line saying what is wrong, never an internal error or a hang, and
 * changes nothing. Plans and PRDs are read bounded (at most limit + 1 bytes, non-regular files
 * refused without blocking); data folders that are a file or read-only, and a journal that is a
 * folder, are named as such. No loop starts here: no model is involved.
 */
import { strict as assert } from 'node:assert';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliResult, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';

const PLAN = '# P\n\n## Write a.txt\nCreate a.txt.\n\n## Verification\n- exists: a.txt\n';

describe('forge CLI processes: bad files and folders end with exit 2 and one line (issue 28)', function () {
  this.timeout(180_000);
  let cliPath: string;
  let repo: TestRepository;
  let work: string;
  let dataDir: string;
  let runner: CliRunner;

  before(async () => {
    cliPath = ensureCliBuilt(REPO_ROOT);
    repo = await createTestRepository({ 'README.md': '# bad files\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-bad-files-'));
    dataDir = join(work, 'data');
    runner = createCliRunner({ cliPath, env: {}, commonArgs: ['--repo', repo.dir] });
  });

  after(async () => {
    await runner?.killAll();
    await repo?.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  /** Exit 2 and exactly one stderr line (no stack, no "internal error"), matching `message`. */
  function refused(r: CliResult, message: RegExp): void {
    const lines = r.stderr.trim().split('\n');
    assert.equal(r.code, 2, `exit ${r.code}\n${r.stderr}`);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^forge: /);
    assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
    assert.match(lines[0]!, message);
  }

  it('devices and a FIFO as the plan: refused at once by check, run and run --dry-run (no read, no hang)', async () => {
    const fifo = join(work, 'plan.fifo');
    execFileSync('mkfifo', [fifo]);
    for (const file of ['/dev/zero', '/dev/urandom', fifo]) {
      for (const args of [['check', file], ['run', file, '--dry-run', '--data-dir', dataDir], ['run', file, '--data-dir', dataDir]]) {
        refused(await runner.run(args, { timeoutMs: 60_000 }), /is not a regular file \(a pipe, device or socket\); give the path of a markdown plan file\.$/);
      }
    }
    assert.equal((await repo.git('branch', '--list', 'forge/*')).trim(), '', 'no loop branch');
  });

  it('a plan over 1 MB and a PRD over 256 KB are refused before they are read whole or sent anywhere', async () => {
    const big = join(work, 'big.md');
    await writeFile(big, PLAN);
    await truncate(big, 50 * 1024 * 1024);
    refused(await runner.run(['check', big]), /big\.md is 52\.4 MB; Forge reads plans of at most 1\.0 MB\. Split it into smaller plans\.$/);
    const prd = join(work, 'prd.md');
    await writeFile(prd, `# Shop\n\n## Feature a: A\n${'Build it well. '.repeat(20_000)}\n`);
    refused(await runner.run(['group', prd, '--data-dir', dataDir]), /prd\.md is 293 KB; Forge reads PRDs of at most 256 KB\. Split it into smaller PRDs\.$/);
  });

  it('--data-dir naming a file: run and status refuse in one line and leave the file as it was', async () => {
    const file = join(work, 'not-a-folder');
    await writeFile(file, 'mine\n');
    const plan = join(work, 'plan.md');
    await writeFile(plan, PLAN);
    for (const args of [['run', plan, '--no-sandbox'], ['status'], ['group', 'status']]) {
      refused(await runner.run([...args, '--data-dir', file]), /cannot write to its data folder .*not-a-folder \(ENOTDIR\)/);
    }
    assert.equal(await readFile(file, 'utf8'), 'mine\n');
  });

  it('a journal that is a folder: status and findings refuse in one line; the folder stays', async () => {
    const dir = join(work, 'journal-folder');
    await mkdir(join(dir, 'forge.db.journal'), { recursive: true });
    for (const args of [['status'], ['findings', 'some-loop']]) {
      refused(await runner.run([...args, '--data-dir', dir]), /cannot open .*forge\.db\.journal \(EISDIR\)/);
    }
    assert.ok(statSync(join(dir, 'forge.db.journal')).isDirectory());
  });

  it('a read-only data folder (a read-only mount, real bwrap): every command says EROFS in one line', async function () {
    const bwrap = ['/usr/bin/bwrap', '/bin/bwrap'].find((p) => existsSync(p));
    if (!bwrap) {
      if (process.env.CI === 'true') assert.fail('bwrap is required under CI=true (a read-only mount of the data folder)');
      this.skip();
    }
    const ro = join(work, 'read-only');
    await mkdir(join(ro, 'worktrees'), { recursive: true });
    const plan = join(work, 'plan-ro.md');
    await writeFile(plan, PLAN);
    const run = (args: string[]) =>
      new Promise<CliResult>((resolve) => {
        execFile(bwrap!, ['--dev-bind', '/', '/', '--ro-bind', ro, ro, process.execPath, cliPath, ...args, '--data-dir', ro, '--repo', repo.dir], { timeout: 60_000 }, (error, stdout, stderr) => {
          resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, signal: null, stdout, stderr });
        });
      });
    for (const args of [['run', plan, '--no-sandbox'], ['run', plan, '--dry-run'], ['status'], ['plan', 'hello']]) {
      refused(await run(args), /cannot write to its data folder .*read-only \(EROFS\)/);
    }
    assert.deepEqual(execFileSync('ls', ['-A', ro], { encoding: 'utf8' }).trim(), 'worktrees');
  });
});
