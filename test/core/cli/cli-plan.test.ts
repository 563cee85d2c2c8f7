/**
 * `forge plan` (issue 15, plan authoring) through the real CLI: real opencode, real git, a real
 * database file; only the model is scripted. The architect drafts through Forge's plan tools; the
 * plan is stored, written to the file, continued in the same session, and `forge run` of the file
 * completes. A hostile architect's file writes and shell commands are refused and the repository
 * stays as it was. Bad input: an empty request, an architect that never writes a plan (session
 * kept, its id printed), an unknown --continue id.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openForgeDatabase } from '../../../src/core/storage';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT, sessionScript } from '../../support/loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { forgeAgentOf, startScriptedModel, text, toolCall, toolCalls, type ScriptedModel, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';

const PLAN = `# Greeting file
Loop Name: greeting

## Objective
The repository has a greeting file.

## Verification
- exists: hello.txt
- contains: hello.txt: hello

## Write the greeting
Create hello.txt containing "hello".
`;

interface DraftJson {
  draft: string;
  status: string;
  outPath: string | null;
  summary: string | null;
  message: string | null;
  reply: string;
  sessionId: string | null;
  turns: number;
  usage: { inputTokens: number; outputTokens: number; cost: number; messages: number };
}

describe('forge plan: the architect drafts a plan of record (real CLI, opencode, git)', function () {
  // Generous: each forge plan starts opencode; on a loaded machine (load 20 on 2 cores) one takes minutes.
  this.timeout(1_500_000);
  let model: ScriptedModel;
  let env: OpencodeTestEnvironment;
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  /** Per architect session: its steps, chosen by the test that starts it. */
  let architectSteps: ScriptStep[][] = [];
  const architectSessions = new Map<string, ScriptStep[]>();
  const architectRequests: ScriptedRequest[] = [];

  before(async () => {
    const cliPath = ensureCliBuilt(REPO_ROOT);
    model = await startScriptedModel();
    env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    repo = await createTestRepository({ 'README.md': '# greeter\n', 'src/app.js': 'console.log("app");\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-plan-'));
    runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', join(work, 'data'), '--repo', repo.dir] });
  });
  after(async () => {
    await runner?.killAll();
    await model?.close();
    await env?.cleanup();
    await repo?.cleanup();
    if (work) await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  /** The architect's sessions take the next prepared script; coder and auditor play a plain loop. */
  function useScripts(loopScript?: ReturnType<typeof sessionScript>): void {
    model.setHandler((request) => {
      if (forgeAgentOf(request) === 'forge-architect') {
        architectRequests.push(request);
        const sid = request.sessionId ?? 'unknown';
        if (!architectSessions.has(sid)) architectSessions.set(sid, architectSteps.shift() ?? []);
        const step = architectSessions.get(sid)!.shift() ?? text('Done.');
        // "@CHECKOUT@" in a step: the folder the prompt names as the architect's checkout.
        const checkout = /checked out \(read-only for you\) at (\S+), at commit/.exec(request.messages.map((m) => JSON.stringify(m.content ?? '')).join('\n'))?.[1];
        return JSON.parse(JSON.stringify(step).replaceAll('@CHECKOUT@', checkout ?? '@CHECKOUT@')) as ScriptStep;
      }
      return loopScript ? loopScript.handler(request) : text('Done.');
    });
  }

  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo.dir, encoding: 'utf8' });
  const repoState = () => ({ status: git('status', '--porcelain', '--untracked-files=all'), head: git('rev-parse', 'HEAD'), worktrees: git('worktree', 'list', '--porcelain') });

  async function storedPlan(id: string): Promise<string | undefined> {
    const db = await openForgeDatabase({ path: join(work, 'data', 'forge.db'), readOnly: true });
    try {
      const repos = createForgeRepositories(db);
      const draft = repos.planDrafts.findById(id);
      return draft ? repos.plans.get(draft.projectId, id)?.content : undefined;
    } finally {
      await db.close();
    }
  }

  it('drafts through plan_write, stores and writes the plan, prints the cost; --continue edits it in the same session; forge run of the file completes', async () => {
    const out = join(work, 'greeting-plan.md');
    architectSteps = [
      [
        toolCall('read', { filePath: '@CHECKOUT@/README.md' }),
        toolCall('forge_plan_write', { content: PLAN.replace('Create hello.txt containing "hello".', 'Create hello.txt.') }),
        text('Drafted. Question: should the greeting be "hello" exactly?'),
        // Second turn (--continue), same session.
        toolCall('forge_plan_edit', { oldString: 'Create hello.txt.', newString: 'Create hello.txt containing "hello".' }),
        text('Updated section 1 as you asked.'),
      ],
    ];
    useScripts();
    const before = repoState();
    const first = await runner.run(['plan', 'add a greeting file', '--out', out], { timeoutMs: 420_000 });
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
    const id = /Plan drafted \(draft ([a-z0-9]+)\): "Greeting file", 1 section/.exec(first.stdout)?.[1];
    assert.ok(id, first.stdout);
    assert.match(first.stdout, new RegExp(`Written to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.match(first.stdout, /The architect says:\n {2}Drafted\. Question: should the greeting be "hello" exactly\?/);
    assert.match(first.stdout, /Drafting cost: \$\d+\.\d{4}, [1-9]\d* input \+ [1-9]\d* output tokens, 3 model messages \(1 turn\)/);
    assert.match(first.stdout, new RegExp(`forge plan --continue ${id} "…"`));
    assert.equal(await readFile(out, 'utf8'), PLAN.replace('Create hello.txt containing "hello".', 'Create hello.txt.'));
    // (The plan tools trim what they store; the file ends with a line break.)
    assert.equal(await storedPlan(id), PLAN.replace('Create hello.txt containing "hello".', 'Create hello.txt.').trimEnd());
    // The architect was told where to read and what was asked, and offered only reading tools.
    const firstRequest = architectRequests[0]!;
    assert.match(firstRequest.lastUserText, /add a greeting file/);
    for (const tool of ['write', 'edit', 'bash', 'task', 'forge_loop_handoff', 'forge_review_write']) assert.ok(!firstRequest.toolNames.includes(tool), `${tool} offered: ${firstRequest.toolNames.join(', ')}`);
    for (const tool of ['read', 'forge_plan_write', 'forge_plan_edit']) assert.ok(firstRequest.toolNames.includes(tool), `${tool} missing: ${firstRequest.toolNames.join(', ')}`);
    assert.match(architectRequests[1]!.toolResults[0]!.content, /# greeter/, 'the architect read the repository');

    const second = await runner.run(['plan', '--continue', id, 'yes, exactly "hello"', '--json'], { timeoutMs: 420_000 });
    assert.equal(second.code, 0, `${second.stdout}\n${second.stderr}`);
    const json = JSON.parse(second.stdout.trim()) as DraftJson;
    assert.equal(json.draft, id);
    assert.equal(json.status, 'drafted');
    assert.equal(json.turns, 2);
    assert.equal(json.reply, 'Updated section 1 as you asked.');
    assert.ok(json.usage.inputTokens > 0 && json.usage.messages === 5, JSON.stringify(json.usage));
    assert.equal(await readFile(out, 'utf8'), PLAN);
    const continued = architectRequests.filter((r) => r.lastUserText.includes('yes, exactly "hello"'));
    assert.ok(continued.length > 0);
    assert.equal(continued[0]!.sessionId, firstRequest.sessionId, 'the answer went to the same session');
    assert.ok(continued[0]!.messages.some((m) => m.role === 'assistant' && JSON.stringify(m.content ?? '').includes('should the greeting be')), 'the session kept the first turn');
    assert.deepEqual(repoState(), before, 'drafting changed nothing in the repository (no file, no commit, no leftover checkout)');

    const loopScript = sessionScript((role) =>
      role === 'code'
        ? [toolCall('write', { filePath: join(work, 'data', 'worktrees', 'greeting', 'hello.txt'), content: 'hello\n' }), toolCall('forge_loop_handoff', { decisions: 'wrote hello.txt', verification: 'none', notesForAuditor: '' })]
        : [toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' })],
    );
    useScripts(loopScript);
    const run = await runner.run(['run', out, '--no-sandbox'], { timeoutMs: 420_000 });
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /ended: completed/);
  });

  it('a hostile architect: its file writes and shell commands are refused, nothing in the repository changes', async () => {
    const out = join(work, 'hostile-plan.md');
    const before = repoState();
    architectSteps = [
      [
        toolCalls([
          { name: 'write', args: { filePath: join(repo.dir, 'pwned.txt'), content: 'pwned' } },
          { name: 'bash', args: { command: `touch ${join(repo.dir, 'pwned-bash.txt')} && git -C ${repo.dir} commit --allow-empty -m pwned`, description: 'mutate' } },
        ]),
        toolCalls([
          { name: 'edit', args: { filePath: join(repo.dir, 'README.md'), oldString: '# greeter', newString: '# pwned' } },
          { name: 'task', args: { description: 'edit', prompt: 'write pwned.txt', subagent_type: 'general' } },
          // Reading is allowed, but only inside the architect's checkout: the user's tree is outside it.
          { name: 'read', args: { filePath: join(repo.dir, 'README.md') } },
        ]),
        toolCall('forge_plan_write', { content: PLAN }),
        text('Plan written.'),
      ],
    ];
    useScripts();
    const r = await runner.run(['plan', 'break things', '--out', out], { timeoutMs: 420_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const sid = architectRequests[architectRequests.length - 1]!.sessionId;
    const requests = architectRequests.filter((q) => q.sessionId === sid);
    const results = requests.flatMap((q) => q.toolResults);
    // opencode does not even offer them (the agent's and the session's rules deny them): the call fails.
    for (const tool of ['write', 'bash', 'edit', 'task']) {
      assert.ok(results.some((x) => x.content.includes(`Model tried to call unavailable tool '${tool}'`)), `the ${tool} call was refused: ${JSON.stringify(results)}`);
    }
    const read = results.find((x) => x.name === 'read');
    assert.ok(read && /reject|denied|not allowed|only inside|prevents you from using this specific tool call/i.test(read.content) && !read.content.includes('# greeter'), `reading outside the checkout: ${read?.content}`);
    assert.ok(!existsSync(join(repo.dir, 'pwned.txt')) && !existsSync(join(repo.dir, 'pwned-bash.txt')));
    assert.equal(await readFile(join(repo.dir, 'README.md'), 'utf8'), '# greeter\n');
    assert.deepEqual(repoState(), before);
    assert.equal(await readFile(out, 'utf8'), PLAN, 'the plan tools still worked');
  });

  it('an architect that never calls plan_write: a clear message, exit 6, the session kept; --continue on it drafts the plan, by default into the data folder (not the working tree)', async () => {
    architectSteps = [[text('Which file should hold the greeting?'), toolCall('forge_plan_write', { content: PLAN }), text('Done, hello.txt it is.')]];
    useScripts();
    const before = repoState();
    // Run from inside the repository, without --out: the draft must not land in the working tree.
    const r = await runner.run(['plan', 'a greeting'], { timeoutMs: 420_000, cwd: repo.dir });
    assert.equal(r.code, 6, `${r.stdout}\n${r.stderr}`);
    const id = /No plan yet \(draft ([a-z0-9]+)\)/.exec(r.stdout)?.[1];
    assert.ok(id, r.stdout);
    const out = join(work, 'data', 'plans', `forge-plan-${id}.md`);
    assert.match(r.stderr, new RegExp(`forge: The architect ended its turn without writing a plan \\(it never called plan_write\\)\\. The session is kept: answer it or ask again with forge plan --continue ${id} "…"\\.`));
    assert.match(r.stdout, /The architect says:\n {2}Which file should hold the greeting\?/);
    assert.ok(!existsSync(out), 'no plan, no file');
    const again = await runner.run(['plan', '--continue', id, 'hello.txt'], { timeoutMs: 420_000, cwd: repo.dir });
    assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stdout, new RegExp(`Written to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.equal(await readFile(out, 'utf8'), PLAN);
    assert.deepEqual(repoState(), before, 'no draft file in the working tree (no untracked file for every run to warn about)');
  });

  it('bad input: an empty request, an unknown --continue id, an --out that exists, an empty answer: exit 2 with what to do', async () => {
    const empty = await runner.run(['plan', '  '], { timeoutMs: 420_000 });
    assert.equal(empty.code, 2, empty.stderr);
    assert.match(empty.stderr, /^forge: forge plan needs the request: what you want planned, e\.g\. forge plan "add a --verbose flag to the CLI"\./);
    const unknown = await runner.run(['plan', '--continue', 'abcdef12', 'go on'], { timeoutMs: 420_000 });
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.equal(unknown.stderr.trim(), 'forge: No plan draft abcdef12 in this repository. Start one with forge plan "what you want".');
    const malformed = await runner.run(['plan', '--continue', '../x', 'go on'], { timeoutMs: 420_000 });
    assert.equal(malformed.code, 2, malformed.stderr);
    assert.match(malformed.stderr, /"\.\.\/x" is not a plan draft id/);
    const existing = join(work, 'exists.md');
    await writeFile(existing, 'mine\n');
    const taken = await runner.run(['plan', 'x', '--out', existing], { timeoutMs: 420_000 });
    assert.equal(taken.code, 2, taken.stderr);
    assert.match(taken.stderr, /exists already; Forge does not overwrite it\. Give another --out, or remove the file\./);
    assert.equal(await readFile(existing, 'utf8'), 'mine\n');
  });
});
