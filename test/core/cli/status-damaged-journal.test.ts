/**
 * `forge status` (the built CLI, a real process) on a data folder whose journal was cut in half:
 * it must change no file of the database and say truthfully which changes it could not read,
 * instead of "No acknowledged change was lost" while a completed loop shows as running.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectIdFor } from '../../../src/core/loop/project';
import { createForgeRepositories, defaultSqlWasmPath, openForgeDatabase } from '../../../src/core/storage';
import { createWorktreeService } from '../../../src/core/workspace';
import { createCliRunner, ensureCliBuilt } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/storage-fixtures';

const LOOP = 'probe';

/** The database files of a data folder (forge.db*), with their size and a hash of their bytes. */
function databaseFiles(dataDir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const name of fs.readdirSync(dataDir).sort()) {
    if (!name.startsWith('forge.db')) continue;
    const bytes = fs.readFileSync(join(dataDir, name));
    files[name] = `${bytes.length} bytes, sha256 ${createHash('sha256').update(bytes).digest('hex')}`;
  }
  return files;
}

describe('forge status on a journal cut in half (built CLI, real files)', function () {
  this.timeout(180_000);
  let repo: TestRepository;
  let work: string;
  let cliPath: string;

  before(() => {
    cliPath = ensureCliBuilt(REPO_ROOT);
  });

  beforeEach(async () => {
    repo = await createTestRepository({ 'README.md': '# probe\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-journal-'));
  });

  afterEach(async () => {
    await repo.cleanup().catch(() => {});
    await rm(work, { recursive: true, force: true });
  });

  it('leaves forge.db and its journal byte-identical and reports the unreadable changes and the older state', async () => {
    const dataDir = join(work, 'data');
    const info = await createWorktreeService({ dataDir, log: { info() {}, warn() {}, error() {}, debug() {} } as never }).inspectRepository(repo.dir);
    const projectId = projectIdFor(info.gitCommonDir);

    // A loop that ran a few phases and completed, each step its own acknowledged change.
    let db = await openForgeDatabase({ path: join(dataDir, 'forge.db'), wasmPath: defaultSqlWasmPath(), autoCompact: false });
    await db.compact(); // the schema in the snapshot; the loop's history only in the journal
    const repos = createForgeRepositories(db);
    repos.loops.create(projectId, { name: LOOP, kind: 'plan' });
    repos.loops.update(projectId, LOOP, { status: 'running' });
    for (let iteration = 1; iteration <= 6; iteration++) {
      repos.transitions.append(projectId, { loopName: LOOP, event: 'handoff', fromPhase: 'coding', toPhase: 'auditing', iteration });
    }
    repos.loops.terminate(projectId, LOOP, { status: 'completed', terminationReason: 'all sections done' });
    assert.equal(repos.loops.get(projectId, LOOP)?.status, 'completed');
    await db.close();

    const journal = join(dataDir, 'forge.db.journal');
    const fullSize = fs.statSync(journal).size;
    fs.truncateSync(journal, Math.floor(fullSize / 2));
    const before = databaseFiles(dataDir);

    const runner = createCliRunner({ cliPath, env: {}, commonArgs: ['--data-dir', dataDir, '--repo', repo.dir] });
    const result = await runner.run(['status', LOOP, '--json']);
    assert.equal(result.code, 0, `forge status failed:\n${result.stderr}`);
    const shown = JSON.parse(result.stdout) as { status: string };
    assert.equal(shown.status, 'running', 'the completion was in the lost part of the journal');

    assert.deepEqual(databaseFiles(dataDir), before, 'forge status changed, created or moved a database file');
    assert.match(result.stderr, new RegExp(`forge: warning: \\[storage\\] Forge cannot read the end of its journal ${journal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the last \\d+ bytes of the journal, from byte \\d+ on, cannot be read`));
    assert.match(result.stderr, /change #\d+ and any change after it are lost from the database/);
    assert.match(result.stderr, /loops they changed may show an older state, for example a loop that completed shown as still running/);
    assert.match(result.stderr, /Forge changed nothing, as this command only reads/);
    assert.doesNotMatch(result.stderr, /No acknowledged change was lost/i);

    // A second look says the same and still changes nothing.
    const again = await runner.run(['status']);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`${LOOP}\\s+running`));
    assert.deepEqual(databaseFiles(dataDir), before);
  });
});
