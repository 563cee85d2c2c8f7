/**
 * `forge group merge ID --into BRANCH`'s refusal says what and why once (issue 28 item 8): real
 * git, a real worktree service; the checkout of the target branch has uncommitted work.
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mergeGroupInto } from '../../../src/core/groups/merge-queue';
import { createWorktreeService } from '../../../src/core/workspace';
import { createTestRepository, type TestRepository } from '../../support/git-repo';

describe('group merge --into: one refusal, said once', () => {
  let repo: TestRepository;
  let data: string;
  before(async () => {
    repo = await createTestRepository({ 'README.md': '# g\n' });
    data = await mkdtemp(join(tmpdir(), 'forge-merge-into-'));
  });
  after(async () => {
    await repo?.cleanup();
    if (data) await rm(data, { recursive: true, force: true });
  });

  it('a dirty checkout of the target: "Forge did not merge" and "nothing was changed" once each', async () => {
    await repo.git('checkout', '-q', '-b', 'forge/group/g1');
    await writeFile(join(repo.dir, 'a.txt'), 'a\n');
    await repo.git('add', 'a.txt');
    await repo.git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'feature a');
    await repo.git('checkout', '-q', 'main');
    await writeFile(join(repo.dir, 'README.md'), '# g, edited\n');
    const mainBefore = (await repo.git('rev-parse', 'main')).trim();
    const worktrees = createWorktreeService({ dataDir: data, log: { info() {}, warn() {}, error() {}, debug() {} } as never });
    const result = await mergeGroupInto(worktrees, { id: 'g1', status: 'completed', repoDir: repo.dir, features: [] }, 'main');
    assert.equal(result.kind, 'refused');
    assert.equal(result.message.match(/Forge did not merge/g)?.length, 1, result.message);
    assert.equal(result.message.match(/nothing was changed/gi)?.length, 1, result.message);
    assert.match(result.message, /uncommitted work/);
    assert.equal((await repo.git('rev-parse', 'main')).trim(), mainBefore, 'main did not move');
  });
});
