/**
 * The live parts of a streamed answer through a real opencode server (scripted model): every
 * piece the model streams reaches the normalised events, in order, and the parts rebuilt from
 * them hold exactly the text sent — the count the live-view benchmark relies on (a normaliser
 * bug once delivered ~2 events/s of 200).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LivePartBuffer, type LivePartUpdate } from '../../../src/core/live/live-parts';
import { createLoopToolBackend } from '../../../src/core/loop/tool-backend';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage';
import { startOpencodeHarness, type OpencodeHarness } from '../../support/opencode-harness';

describe('live parts of a streamed answer (real opencode)', function () {
  this.timeout(300_000);
  let h: OpencodeHarness;
  let db: ForgeDatabase;
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'forge-live-data-'));
    db = await openForgeDatabase({ path: join(dataDir, 'forge.db') });
    h = await startOpencodeHarness({ loopName: 'live-stream', backend: createLoopToolBackend({ projectId: 'p', db }) });
  });
  after(async () => {
    await h?.cleanup();
    await db?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('every streamed piece arrives as a delta of one text part, and the rebuilt text is the text sent', async () => {
    const pieces = Array.from({ length: 300 }, (_, i) => `w${String(i).padStart(5, '0')} `);
    h.model.enqueue({ kind: 'text', text: pieces.join(''), pacing: { pieces, intervalMs: 5 } });
    const sessionId = await h.startSession('code');
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'stream');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const updates: LivePartUpdate[] = h.events
      .slice(from)
      .flatMap((e) => (e.type === 'activity' && e.sessionId === sessionId && e.part && !e.part.fromUser ? [e.part] : []));
    const buffer = new LivePartBuffer({ maxParts: 50, maxTextChars: 100_000 });
    for (const u of updates) buffer.apply(u);
    const texts = buffer.parts().filter((p) => p.kind === 'text' && p.textLength > 0);
    assert.equal(texts.length, 1, `one text part (${JSON.stringify(texts.map((t) => t.text.slice(0, 40)))})`);
    assert.equal(texts[0]!.text, pieces.join(''));
    const deltas = updates.filter((u) => u.partId === texts[0]!.partId && u.delta !== undefined);
    const wholes = updates.filter((u) => u.partId === texts[0]!.partId && u.text !== undefined);
    console.log(`      ${pieces.length} pieces sent; ${deltas.length} deltas and ${wholes.length} whole-text updates of the part received`);
    assert.equal(deltas.map((d) => d.delta).join('') + '', pieces.slice(pieces.length - deltas.length).join('').slice(-deltas.map((d) => d.delta).join('').length) || '', 'the deltas are the end of the text, in order');
    assert.ok(deltas.length >= pieces.length - 2, `a delta per piece (${deltas.length} of ${pieces.length})`);
  });
});
