/**
 * `forge tell` (issue 29 item 5): the user's words reach a running loop through the process that
 * supervises it. A `forge run` process is the data folder's engine; a separate `forge tell`
 * process hands it the message. While the coder's session is busy (its bash waits for a gate) the
 * message goes into that session, and the scripted model receives it in a later request of the
 * same session; while the loop sits at its section gate (a Verify: check waits for a gate, the
 * coder has handed off) it is kept and opens the next session's first prompt. A loop that is not
 * running is refused with exit 2.
 *
 * Real parts: the built CLI in child processes, the opencode binary, real git, the real database,
 * the sandbox; the model is the test's scripted model playing Forge's embedded agent.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import { forgeAgentOf, type ScriptedRequest } from '../../support/scripted-model';

const fence = '```';
const PLAN = `# Told
Loop Name: told

## Write told.txt
${fence}txt file=told.txt
told
${fence}
Run: \`touch coder-busy && while [ ! -f coder-gate ]; do sleep 0.2; done && echo coder gate open\`
Verify: \`touch at-gate && while [ ! -f check-gate ]; do sleep 0.2; done\`
`;

/** The watchdogs must not fire while a gate is closed. */
const SETTINGS = { 'forge.loop.stallTimeoutMs': 300_000, 'forge.loop.busyStallTimeoutMs': 300_000, 'forge.loop.idleGateTimeoutMs': 300_000 };

const IN_SESSION = 'Please keep told.txt lower-case (tell #1, into the busy session).';
const BETWEEN = 'The auditor should also look at the README (tell #2, at the gate).';

async function until(what: string, check: () => boolean, timeoutMs = 240_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const mentions = (r: ScriptedRequest, words: string) => JSON.stringify(r.messages).includes(JSON.stringify(words).slice(1, -1));

describe('forge tell: talk to a running loop (real processes, real opencode, scripted model)', function () {
  this.timeout(600_000);
  const w = useCliLoopWorld('forge-cli-tell-', { 'README.md': '# told\n' });

  it('reaches the busy session at once, and the next session when the loop is between sessions; refuses a loop that is not running', async () => {
    w.model.setHandler((request) => embeddedAgentStep(request));
    const planPath = join(w.work, 'told.md');
    await writeFile(planPath, PLAN);
    const worktree = join(w.work, 'data', 'worktrees', 'told');
    const run = w.runner.start(['run', planPath], { settings: SETTINGS });

    // 1. The coder's session is busy (its bash waits for the coder gate).
    await until('the coder runs its command', () => existsSync(join(worktree, 'coder-busy')));
    const coderSession = w.model.agentRequests.find((r) => forgeAgentOf(r) === 'forge-code')!.sessionId;
    assert.ok(coderSession, 'the coder session is known');
    const told = await w.runner.run(['tell', 'told', IN_SESSION]);
    assert.equal(told.code, 0, `${told.stdout}\n${told.stderr}`);
    assert.match(told.stdout, new RegExp(`^Message to loop "told" sent into its running session ${coderSession}\\.$`, 'm'));
    await writeFile(join(worktree, 'coder-gate'), '');
    const later = await w.model.waitForRequest((r) => r.sessionId === coderSession && mentions(r, IN_SESSION), 120_000);
    assert.ok(mentions(later, `Message from the user (via forge tell):\n\n${IN_SESSION}`), 'framed as the user\'s message');
    assert.equal(forgeAgentOf(later), 'forge-code');

    // 2. The coder handed off; the section's check holds the loop at its gate: no session runs.
    await until('the loop is at its gate', () => existsSync(join(worktree, 'at-gate')));
    const sessionsBefore = new Set(w.model.agentRequests.map((r) => r.sessionId));
    const kept = await w.runner.run(['tell', 'told', '--json', BETWEEN]);
    assert.equal(kept.code, 0, `${kept.stdout}\n${kept.stderr}`);
    assert.deepEqual(JSON.parse(kept.stdout.trim()), { loop: 'told', delivery: 'next_session', sessionId: null });
    assert.equal(w.model.agentRequests.some((r) => mentions(r, BETWEEN)), false, 'nothing sent while at the gate');
    await writeFile(join(worktree, 'check-gate'), '');
    const end = await run.exited;
    assert.equal(end.code, 0, run.describe());
    const firstOfNext = w.model.agentRequests.find((r) => !sessionsBefore.has(r.sessionId));
    assert.ok(firstOfNext, 'a next session ran');
    assert.equal(forgeAgentOf(firstOfNext), 'forge-auditor');
    assert.ok(mentions(firstOfNext, BETWEEN), "the next session's first prompt carries the message");
    // Delivered once: the sessions after it do not get it again.
    const carrying = new Set(w.model.agentRequests.filter((r) => mentions(r, BETWEEN)).map((r) => r.sessionId));
    assert.deepEqual([...carrying], [firstOfNext.sessionId]);

    // The transcript: both messages printed by the run that supervised the loop (inert text).
    assert.match(run.stdout(), new RegExp(`^\\[told\\] message from the user sent into session ${coderSession}: ${IN_SESSION.replace(/[.()#]/g, '\\$&')}$`, 'm'));
    assert.match(run.stdout(), /^\[told\] message from the user kept for the next session: The auditor should also look/m);

    // 3. Not running any more: refused, exit 2, one clear line.
    const refused = await w.runner.run(['tell', 'told', 'too late']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /^forge: Loop "told" is not running \(it is completed\): a message reaches only a running loop\.$/m);
  });

  it('a running loop whose supervising process died is refused with exit 2 and how to take it over', async () => {
    const planPath = join(w.work, 'orphan.md');
    await writeFile(planPath, PLAN.replace('Loop Name: told', 'Loop Name: orphan'));
    const worktree = join(w.work, 'data', 'worktrees', 'orphan');
    const run = w.runner.start(['run', planPath], { settings: SETTINGS });
    await until('the coder runs its command', () => existsSync(join(worktree, 'coder-busy')));
    run.signal('SIGKILL');
    await run.exited;
    const r = await w.runner.run(['tell', 'orphan', 'anyone there?']);
    assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /^forge: Loop "orphan" cannot take a message: its supervisor, process \d+ \([^)]*gone\), is gone\. Force-restart it \("forge restart orphan --force", or Force Restart Loop in VS Code\)/m);
    assert.equal(w.model.agentRequests.some((q) => mentions(q, 'anyone there?')), false);
  });
});
