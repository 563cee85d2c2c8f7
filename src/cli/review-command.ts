/**
 * `forge review NAME` (issue 29 items 2–3): list the comments of the user's review, add one
 * (`--comment FILE:LINE[-END] "TEXT" [--severity S]`), close one (`--resolve ID`, `--dismiss ID`),
 * or send them back (`--send`). Sending, and closing the last comment of a loop awaiting its
 * review, run the loop as `forge restart` does (handed to the data folder's engine when one runs).
 */
import type { ForgeSettings } from '../core/config/settings';
import type { ForgeEngine } from '../core/engine';
import type { ReviewFindingRow } from '../core/storage/repositories';
import { inertLine, inertText } from '../core/text/inert-text';
import { EXIT, type CliCommand } from './args';
import type { runLoop as RunLoop } from './run-loop';

type ReviewCommand = Extract<CliCommand, { command: 'review' }>;

/** `runLoop`: run-loop.ts's, handed in (main.ts loads it at start; this module only on demand). */
export async function runReviewCommand(engine: ForgeEngine, cmd: ReviewCommand, settings: ForgeSettings, io: { out: (line: string) => void; err: (line: string) => void }, runLoop: typeof RunLoop): Promise<number> {
  const { projectId } = await engine.runtime.projectOf(cmd.repo);
  const ref = { projectId, name: cmd.name };
  const action = cmd.action;
  const drive = (review: 'send' | 'final') =>
    runLoop(engine.dataDir, () => Promise.resolve(engine), { ...cmd, command: 'restart', review, force: false, model: null, auditorModel: null, variant: null, budget: null, follow: false, noHandover: false }, settings, io);
  switch (action.kind) {
    case 'list': {
      const rows = engine.review.list(ref);
      if (cmd.json) io.out(JSON.stringify(rows.map(reviewJson)));
      else io.out(rows.length === 0 ? `Loop "${cmd.name}" has no comment of your review. Add one: forge review ${cmd.name} --comment FILE:LINE "TEXT".` : rows.map(reviewLine).join('\n'));
      return EXIT.completed;
    }
    case 'comment': {
      const row = engine.review.comment(ref, { file: action.file, line: action.line, lineEnd: action.lineEnd, severity: action.severity, text: action.text });
      io.out(cmd.json ? JSON.stringify(reviewJson(row)) : `Comment #${row.id} (${row.severity}) on ${where(row)} added to loop "${cmd.name}". Send the review with: forge review ${cmd.name} --send`);
      return EXIT.completed;
    }
    case 'resolve':
    case 'dismiss': {
      const settled = action.kind === 'resolve' ? engine.review.resolve(ref, action.id) : engine.review.dismiss(ref, action.id);
      const done = action.kind === 'resolve' ? 'resolved' : 'dismissed';
      if (cmd.json) io.out(JSON.stringify({ ...reviewJson(settled.finding), next: settled.next }));
      else io.out(`Comment #${settled.finding.id} of loop "${cmd.name}": ${settled.finding.status === done ? done : `already ${settled.finding.status}`}.${settled.next === 'wait' ? ' Other comments are still open.' : ''}`);
      if (settled.next !== 'complete') return EXIT.completed;
      if (!cmd.json) io.out(`No comment of your review is open: loop "${cmd.name}" runs its final gate and completes.`);
      return drive('final');
    }
    case 'send': {
      const open = engine.review.list(ref).filter((f) => f.status === 'open').length;
      if (!cmd.json) io.out(`Sending ${open} comment${open === 1 ? '' : 's'} of your review to loop "${cmd.name}".`);
      return drive('send');
    }
  }
}

function where(f: Pick<ReviewFindingRow, 'file' | 'line' | 'lineEnd'>): string {
  return `${inertLine(f.file)}:${f.line}${f.lineEnd ? `-${f.lineEnd}` : ''}`;
}

function reviewLine(f: ReviewFindingRow): string {
  const lines = [`#${f.id} ${f.status.padEnd(9)} ${f.severity.padEnd(7)} ${where(f)}`, `    ${inertText(f.description).split('\n').join('\n    ')}`];
  if (f.reply) lines.push(`    coder: ${inertText(f.reply).split('\n').join('\n    ')}`);
  return lines.join('\n');
}

function reviewJson(f: ReviewFindingRow) {
  return { id: f.id, file: f.file, line: f.line, lineEnd: f.lineEnd, severity: f.severity, status: f.status, text: f.description, reply: f.reply, createdAt: f.createdAt };
}
