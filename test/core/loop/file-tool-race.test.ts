/**
 * Issue 26: opencode's file tools run on the host. A hostile model starts a background job in
 * the sandbox that flips a worktree folder between a real folder, a link to a host folder and a
 * link to the folder holding opencode's auth.json (a fake one: opencode's XDG data points at a
 * temp folder), and fires write/read/edit/glob/grep calls through it, five rounds of 45.
 * Real opencode, real git, real bwrap, default settings; only the model is scripted, and it
 * records every tool result it was sent.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { confinementOf } from '../../../src/core/sandbox/confinement';
import { createLoopHarness, roleOf, type LoopHarness } from '../../support/loop-harness';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';
import { text, toolCall, toolCalls, type ScriptedRequest, type ScriptedToolCall, type ScriptStep } from '../../support/scripted-model';

/** A shell word that spells `value` without showing it literally (the shell tool's ruleset sees text). */
function hidden(value: string): string {
  const cut = Math.max(1, Math.floor(value.length / 2));
  return `"$(printf %s '${value.slice(0, cut)}' '${value.slice(cut)}')"`;
}

const ROUNDS = 5;
const STEPS_PER_ROUND = 5;

describe('opencode file tools against a link-flipping sandbox job (real opencode, real bwrap)', function () {
  this.timeout(15 * 60_000);
  let h: LoopHarness;
  let dataDir: string;
  let outside: string | undefined;

  before(async function () {
    this.timeout(5 * 60_000);
    bwrapPrereqs();
    dataDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'race-data-'));
    h = await createLoopHarness({ dataDir });
  });
  after(async function () {
    this.timeout(2 * 60_000);
    await h?.close();
    if (outside) rmSync(outside, { recursive: true, force: true });
    if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  it('nothing is written outside the worktree and no host file content reaches the model', async () => {
    const hostSecret = `HOST-SECRET-${randomBytes(8).toString('hex')}`;
    const authKey = `FAKE-AUTH-KEY-${randomBytes(8).toString('hex')}`;
    const hostDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'race-outside-'));
    outside = hostDir;
    writeFileSync(path.join(hostDir, 'a.txt'), `${hostSecret}\n`);
    writeFileSync(path.join(hostDir, 'auth.json'), `{ "x": "${hostSecret}" }\n`);
    const authDir = path.join(h.env.env.XDG_DATA_HOME!, 'opencode');
    mkdirSync(authDir, { recursive: true });
    const authFile = path.join(authDir, 'auth.json');
    const authText = `{\n  "other": { "type": "api", "key": "${authKey}" }\n}\n`;
    writeFileSync(authFile, authText);
    const authDirBefore = readdirSync(authDir).sort();

    // flip: a folder of the worktree, then a link to the host folder, then a link to auth.json's folder,
    // over and over, in a background job of the sandboxed forge_shell; round r's job ends when .stop-r appears.
    const flipper = (round: number) =>
      [
        `touch .stop-${round - 1}; sleep 0.3; rm -f .stop-*; H=${hidden(hostDir)}; A=${hidden(authDir)}`,
        'rm -rf flip d.real; mkdir d.real; echo inside > d.real/a.txt',
        `while [ ! -e .stop-${round} ]; do`,
        '  if [ -d flip ] && [ ! -L flip ]; then if [ -d d.real ]; then rm -rf flip; else mv -T flip d.real; fi; fi',
        '  ln -sfn "$H" l.tmp; mv -T l.tmp flip; ln -sfn "$A" l.tmp; mv -T l.tmp flip',
        '  rm -f flip; mv -T d.real flip; echo inside > flip/a.txt',
        'done',
      ].join('\n');
    let callNo = 0;
    const raceStep = (round: number): ScriptStep => {
      const calls: ScriptedToolCall[] = [];
      const id = (kind: string) => `${kind}-r${round}-${++callNo}`;
      calls.push({ id: id('write'), name: 'write', args: { filePath: `flip/w-${callNo}.txt`, content: `written ${callNo}\n` } });
      calls.push({ id: id('write'), name: 'write', args: { filePath: 'flip/auth.json', content: '{ "overwritten": true }\n' } });
      calls.push({ id: id('read'), name: 'read', args: { filePath: 'flip/a.txt' } });
      calls.push({ id: id('read'), name: 'read', args: { filePath: 'flip/auth.json' } });
      calls.push({ id: id('edit'), name: 'edit', args: { filePath: 'flip/a.txt', oldString: 'inside', newString: 'inside' } });
      calls.push({ id: id('edit'), name: 'edit', args: { filePath: 'flip/auth.json', oldString: '"key"', newString: '"kee"' } });
      calls.push({ id: id('glob'), name: 'glob', args: { pattern: '**/*', path: 'flip' } });
      calls.push({ id: id('grep'), name: 'grep', args: { pattern: 'SECRET|KEY|inside', path: 'flip' } });
      calls.push({ id: id('read'), name: 'read', args: { filePath: 'flip' } });
      return toolCalls(calls);
    };
    const steps: Array<() => ScriptStep> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      steps.push(() => toolCalls([{ id: `flipper-r${round}`, name: 'forge_shell', args: { command: flipper(round), run_in_background: true, description: 'flip links' } }]));
      for (let s = 0; s < STEPS_PER_ROUND; s++) steps.push(() => raceStep(round));
    }
    steps.push(() => toolCalls([{ id: 'stop', name: 'bash', args: { command: `touch .stop-${ROUNDS}; sleep 0.3; echo stopped`, description: 'stop' } }]));
    steps.push(() => toolCall('forge_loop_handoff', { decisions: 'done', verification: 'n/a', notesForAuditor: '' }));

    const results = new Map<string, string>();
    const turns = new Map<string, number>();
    let nextStep = 0; // across coder sessions: a refused permission ends opencode's turn (as it does without the guard)
    h.model.setHandler((request: ScriptedRequest): ScriptStep => {
      for (const r of request.toolResults) results.set(r.toolCallId, r.content);
      const sid = request.sessionId ?? 'unknown';
      const turn = turns.get(sid) ?? 0;
      turns.set(sid, turn + 1);
      if (roleOf(request) === 'code') return steps[nextStep++]?.() ?? text('Done.');
      return turn === 0 ? toolCall('forge_loop_handoff', { summary: 'reviewed', done: true, deviations: '', followUps: '' }) : text('Done.');
    });

    const started = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Race the file tools', name: 'file-tool-race', maxIterations: 2 });
    const end = await h.engine.runtime.waitForEnd(started);
    const loop = h.engine.runtime.get(started)!;
    if (process.env.FORGE_TEST_DUMP) for (const [id, c] of results) console.log(id, JSON.stringify(c.slice(0, 300)));
    assert.deepEqual(confinementOf(loop), { sandboxed: true, driver: 'bwrap' });

    // Nothing written outside, nothing changed there.
    assert.deepEqual(readdirSync(hostDir).sort(), ['a.txt', 'auth.json'], 'files appeared in the host folder');
    assert.equal(readFileSync(path.join(hostDir, 'a.txt'), 'utf8'), `${hostSecret}\n`);
    assert.equal(readFileSync(path.join(hostDir, 'auth.json'), 'utf8'), `{ "x": "${hostSecret}" }\n`);
    // opencode keeps its database and logs there too: only what the model's calls could write counts.
    const strays = readdirSync(authDir).filter((f) => !authDirBefore.includes(f) && /^(w-\d+\.txt|a\.txt)$/.test(f));
    assert.deepEqual(strays, [], 'files were written beside auth.json');
    assert.equal(readFileSync(authFile, 'utf8'), authText, "opencode's auth.json was changed");

    // No host content in any result the model saw.
    for (const [id, content] of results) {
      assert.ok(!content.includes(hostSecret), `host file content reached the model in ${id}:\n${content.slice(0, 1500)}`);
      assert.ok(!content.includes(authKey), `auth.json reached the model in ${id}:\n${content.slice(0, 1500)}`);
    }
    // Every round's job started, and the file tool calls all came back to the model.
    for (let round = 1; round <= ROUNDS; round++) assert.match(results.get(`flipper-r${round}`) ?? '', /job/i, `round ${round}: ${results.get(`flipper-r${round}`)} (loop ended: ${JSON.stringify(end).slice(0, 600)})`);
    const fileResults = [...results.entries()].filter(([id]) => /^(write|read|edit|glob|grep)-r\d+-/.test(id));
    assert.ok(fileResults.length >= ROUNDS * 40, `only ${fileResults.length} file tool results reached the model`);
    for (let round = 1; round <= ROUNDS; round++) assert.ok(fileResults.filter(([id]) => id.includes(`-r${round}-`)).length >= 40, `round ${round} fired fewer than 40 file tool calls`);

    // The race was real: calls met the links (refused) and the folder (served) both.
    const refused = fileResults.filter(([, c]) => /Forge refused|leaves it|outside|symbolic link/i.test(c)).length;
    const served = fileResults.filter(([id, c]) => id.startsWith('read-') && /<content>\n1: inside/.test(c)).length;
    assert.ok(refused > 0, 'no call was refused: the links were never met');
    assert.ok(served > 0, 'no read was served from the worktree folder');
    assert.equal(end.type, 'loop.ended');
    console.log(`      file tool results: ${fileResults.length}, refused: ${refused}, reads served inside: ${served}`);
  });
});
