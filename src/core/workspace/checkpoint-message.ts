/**
 * Commit messages Forge writes on a loop branch (SPEC §2 Checkpoints). Kept to
 * one subject line so `git log --oneline` reads as the loop's history.
 */

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function withBody(subject: string, body: string | undefined): string {
  const trimmed = body?.trim();
  return trimmed ? `${subject}\n\n${trimmed}\n` : subject;
}

/** `section <N>: <title>` — the commit of a section whose audit came back clean. */
export function sectionCheckpointMessage(sectionNumber: number, title: string, body?: string): string {
  const heading = oneLine(title);
  const subject = heading === '' ? `section ${sectionNumber}` : `section ${sectionNumber}: ${heading}`;
  return withBody(subject, body);
}

/** `loop: <name> <reason> after <N> iterations` — what teardown commits of the work left over. */
export function loopTeardownMessage(loopName: string, reason: string, iterations: number, body?: string): string {
  return withBody(`loop: ${loopName} ${oneLine(reason)} after ${iterations} iterations`, body);
}
