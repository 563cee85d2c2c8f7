/**
 * `forge goal … --follow` through the real CLI (real opencode, git, the scripted model): the
 * agent's tool calls appear as one line each (name, short arguments, short result, a failed one
 * marked), its streamed text as one line per message; with --json as JSON lines.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { toolCall, type ScriptStep } from '../../support/scripted-model';

describe('forge goal --follow prints what the agent does (real CLI, opencode, git)', function () {
  this.timeout(300_000);
  const w = useCliLoopWorld('forge-follow-', { 'README.md': '# follow\n' });

  function script(loop: string) {
    const dir = join(w.work, 'data', 'worktrees', loop);
    return sessionScript((role) => {
      if (role === 'code') {
        const withText: ScriptStep = { kind: 'tool-calls', text: 'I will write\nthe greeting now.', calls: [{ name: 'write', args: { filePath: join(dir, 'hello.js'), content: "console.log('hello');\n// second line\n" } }] };
        return [
          withText,
          // Hostile: a read of a file that does not exist fails; the line says so.
          toolCall('read', { filePath: join(dir, 'missing.txt') }),
          toolCall('forge_loop_handoff', { decisions: 'Wrote hello.js.', verification: 'none', notesForAuditor: '' }),
        ];
      }
      return [toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' })];
    });
  }

  it('one line per tool call with short arguments and result, one per message, in order, before the phase change', async () => {
    const loop = 'follow-text';
    w.model.setHandler(script(loop).handler);
    const r = await w.runner.run(['goal', 'write a greeting', '--name', loop, '--no-sandbox', '--follow']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const lines = r.stdout.split('\n');
    const live = lines.filter((l) => / › (tool|says|thinking)/.test(l));
    const write = live.findIndex((l) => /^\[follow-text\] coding › tool write filePath="[^"]*hello\.js" content="console\.log\('hello'\); \/\/ second line" \(3 lines\) → /.test(l));
    assert.ok(write >= 0, `a line for the write call:\n${r.stdout}`);
    const says = live.findIndex((l) => l === '[follow-text] coding › says: I will write the greeting now.');
    assert.ok(says >= 0 && says < write, `the text, collapsed to one line, before the call it preceded:\n${r.stdout}`);
    assert.ok(live.some((l) => /^\[follow-text\] coding › tool FAILED read filePath="[^"]*missing[^"]*" → error: File not found: /.test(l)), `the failed read is marked:\n${r.stdout}`);
    assert.ok(live.some((l) => /^\[follow-text\] coding › tool forge_loop_handoff decisions="Wrote hello\.js\."/.test(l)), r.stdout);
    assert.ok(live.some((l) => /^\[follow-text\] auditing › tool forge_loop_handoff summary="fine" done=true/.test(l)), r.stdout);
    // Each call once, not once per state change (pending, running, completed).
    assert.equal(live.filter((l) => / tool write /.test(l)).length, 1, r.stdout);
    const handoffLine = lines.findIndex((l) => /coding › tool forge_loop_handoff/.test(l));
    const phaseLine = lines.findIndex((l) => /\] coding → auditing/.test(l));
    assert.ok(handoffLine >= 0 && phaseLine > handoffLine, `the coder's calls come before the phase change:\n${r.stdout}`);
  });

  it('--json: the same as JSON lines beside the loop events', async () => {
    const loop = 'follow-json';
    w.model.setHandler(script(loop).handler);
    const r = await w.runner.run(['goal', 'write a greeting', '--name', loop, '--no-sandbox', '--follow', '--json']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const objects = r.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Record<string, unknown>);
    const tools = objects.filter((o) => o.type === 'live.tool');
    assert.deepEqual(tools.map((t) => `${t.phase}:${t.tool}:${t.status}`), ['coding:write:completed', 'coding:read:error', 'coding:forge_loop_handoff:completed', 'auditing:forge_loop_handoff:completed']);
    assert.match(String(tools[0]!.args), /^filePath=".*hello\.js" content=/);
    assert.equal(typeof tools[0]!.sessionId, 'string');
    const texts = objects.filter((o) => o.type === 'live.text');
    // The coder's message, then each session's closing words after its handoff; never Forge's prompts.
    assert.deepEqual(texts.map((t) => `${t.phase}:${t.text}`), ['coding:I will write\nthe greeting now.', 'coding:Done.', 'auditing:Done.']);
    assert.ok(objects.some((o) => o.type === 'loop.ended'));
  });
});
