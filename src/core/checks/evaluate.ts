/**
 * What check results mean, pure: a summary for the gate and the surfaces, the finding a failed
 * check becomes, and the `path:line` its output names.
 */
import { posix } from 'node:path';
import { missingCommandMessage, type ToolchainPlace } from './missing-command';
import type { CheckFinding, CheckResult, CheckScope, CheckSpec, CheckSummary, FileLocation } from './types';

export function summariseCheckResults(results: readonly CheckResult[]): CheckSummary {
  const failed = results.filter((r) => r.status !== 'passed');
  const total = results.length;
  const passedCount = total - failed.length;
  const noun = (n: number) => (n === 1 ? 'check' : 'checks');
  let text: string;
  if (total === 0) text = 'No checks to run.';
  else if (failed.length === 0) text = total === 1 ? 'The check passed.' : `All ${total} checks passed.`;
  else text = `${failed.length} of ${total} ${noun(total)} failed: ${failed.map((r) => `${r.label} (${r.message})`).join('; ')}.`;
  return { passed: failed.length === 0, total, passedCount, failed, text };
}

/** The fingerprint of a check's finding: the check's scope and what it asserts, so it survives reordering. */
export function checkFindingFingerprint(spec: Pick<CheckSpec, 'scope' | 'key'>): string {
  return `check:${scopeKey(spec.scope)}:${spec.key}`;
}

function scopeKey(scope: CheckScope): string {
  return scope.kind === 'section' ? `section-${scope.index + 1}` : scope.kind;
}

export interface CheckFindingOptions {
  /** The loop's worktree (absolute), to tell which files the output names are the project's. */
  worktreeDir: string;
  /** Whether a worktree-relative path is a file of the worktree (the caller asks the disk); default: any. */
  isWorktreeFile?: (path: string) => boolean;
  /** Where Forge ran it, for the finding's text; default `in the worktree`. */
  ranOn?: string;
  /** How much of the output tail the finding carries; default 8 KiB (its end). */
  maxOutputBytes?: number;
  /** Where the loop's commands find their programs: a missing command's finding names it. */
  toolchain?: ToolchainPlace;
}

const DEFAULT_FINDING_OUTPUT_BYTES = 8 * 1024;

/** The finding a failed check becomes (severity bug, source "check"); null for a passed or cancelled one. */
export function checkFinding(spec: CheckSpec, result: CheckResult, options: CheckFindingOptions): CheckFinding | null {
  // A cancelled run says nothing about the work.
  if (result.status === 'passed' || result.status === 'cancelled') return null;
  let location: FileLocation | undefined;
  if (spec.kind === 'command') {
    location = extractFileLocations(result.outputTail, options.worktreeDir, options.isWorktreeFile)[0];
  } else if ((spec.kind === 'contains' || spec.kind === 'matches') && result.status === 'failed') {
    location = { file: spec.path, line: 0 };
  }
  const lines: string[] = [`Check failed: ${spec.label}`, `Written in ${spec.origin}; Forge ran it ${options.ranOn ?? 'in the worktree'} and ${resultPhrase(result)}.`];
  if (spec.kind === 'command') {
    const missing = options.toolchain ? missingCommandMessage(result.exitCode, result.outputTail, options.toolchain) : null;
    if (missing) lines.push('', missing);
    lines.push('', 'Command:', fence(spec.command, 'sh'));
    if (result.outputBytes === 0) lines.push('', 'It printed nothing.');
    else {
      const shown = lastBytes(result.outputTail, options.maxOutputBytes ?? DEFAULT_FINDING_OUTPUT_BYTES);
      const partial = Buffer.byteLength(shown) < result.outputBytes;
      lines.push('', partial ? `Output (the last ${Buffer.byteLength(shown)} of ${result.outputBytes} bytes):` : 'Output:', fence(shown, ''));
    }
  }
  lines.push(
    '',
    'This finding comes from a check, not from the auditor: it is resolved when the check passes, and the loop cannot complete before.',
  );
  return {
    severity: 'bug',
    source: 'check',
    checkId: spec.id,
    file: location?.file ?? '',
    line: location?.line ?? 0,
    description: lines.join('\n'),
    fingerprint: checkFindingFingerprint(spec),
  };
}

function resultPhrase(result: CheckResult): string {
  const seconds = (result.durationMs / 1000).toFixed(1);
  if (result.kind !== 'command' && result.status === 'failed') return `found that ${result.message}`;
  switch (result.status) {
    case 'failed':
    case 'timed-out':
      return `it ${result.message} (after ${seconds} s)`;
    case 'not-started':
      return `it could not run: ${result.message.replace(/^could not start: /, '')}`;
    case 'refused':
      return `refused it: ${result.message}`;
    default:
      return `it ${result.message}`;
  }
}

/** A markdown fence longer than any backtick run inside the text. */
function fence(text: string, language: string): string {
  let longest = 2;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  const marker = '`'.repeat(longest + 1);
  return `${marker}${language}\n${text.replace(/\n$/, '')}\n${marker}`;
}

function lastBytes(text: string, max: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return text;
  let start = bytes.length - max;
  while (start < bytes.length && (bytes[start]! & 0xc0) === 0x80) start++;
  return bytes.subarray(start).toString('utf8');
}

/** `:12` or `:12:5` after a path (node, mocha, pytest, gcc, eslint, tsc --pretty). */
const COLON_LINE = /:(\d+)(?::(\d+))?(?!\d)/g;
/** `(12,5)` after a path (tsc). */
const PAREN_LINE = /\((\d+),(\d+)\)/g;
/** `File "/abs/x.py", line 12, in f` (Python tracebacks). */
const PYTHON_FRAME = /File "([^"\n]{1,1000})", line (\d+)/g;
/** Characters that end a path written in an output. */
const NOT_IN_PATH = new Set([...' \t\n\r:\'"`()[]<>,|=']);

/**
 * The places in the worktree an output names, in the order it names them, each once. Skips
 * paths outside the worktree, dependencies (`node_modules/`, `site-packages/`), Node's own
 * modules and anything that does not look like a file (a host:port, a time of day). Pure, and
 * linear in the output's length: it finds each `:LINE` / `(LINE,COL)` and reads the path
 * backwards from it (a regular expression matching the path first backtracks quadratically
 * over a long line).
 */
export function extractFileLocations(output: string, worktreeDir: string, isWorktreeFile: (path: string) => boolean = () => true): FileLocation[] {
  const found: Array<FileLocation & { at: number }> = [];
  const seen = new Set<string>();
  const add = (at: number, written: string, line: string, column?: string) => {
    const file = toWorktreePath(written, worktreeDir);
    const lineNumber = Number(line);
    if (file === null || !(lineNumber > 0) || !isWorktreeFile(file)) return;
    const id = `${file}:${lineNumber}`;
    if (seen.has(id)) return;
    seen.add(id);
    found.push({ file, line: lineNumber, ...(column ? { column: Number(column) } : {}), at });
  };
  // Colours (tsc --pretty, pytest, mocha on a terminal) would split `src/x.ts:4:7`.
  const plain = output.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');
  const pathBefore = (end: number): { at: number; path: string } | null => {
    let start = end;
    while (start > 0 && !NOT_IN_PATH.has(plain[start - 1]!)) start--;
    if (start === end) return null;
    let path = plain.slice(start, end);
    // `file:///abs/x.js`: the scan stopped at the scheme's colon.
    if (path.startsWith('///') && plain.slice(Math.max(0, start - 5), start) === 'file:') path = path.slice(2);
    // A URL (`http://host/x.js`) or what follows a host:port (`localhost:3000/a.ts`).
    else if (path.startsWith('//') || plain[start - 1] === ':') return null;
    return { at: start, path };
  };
  for (const m of plain.matchAll(PYTHON_FRAME)) add(m.index!, m[1]!, m[2]!);
  for (const regex of [PAREN_LINE, COLON_LINE]) {
    for (const m of plain.matchAll(regex)) {
      const path = pathBefore(m.index!);
      if (path) add(path.at, path.path, m[1]!, m[2]);
    }
  }
  return found.sort((a, b) => a.at - b.at).map(({ at: _at, ...location }) => location);
}

/** A path as an output wrote it, relative to the worktree, or null when it is not a project file there. */
function toWorktreePath(written: string, worktreeDir: string): string | null {
  let path = written;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) return null; // a URL (file:// is stripped before)
  try {
    if (path.includes('%')) path = decodeURIComponent(path);
  } catch {
    return null;
  }
  const root = worktreeDir.replace(/\/+$/, '');
  if (path.startsWith('/')) {
    if (!path.startsWith(`${root}/`)) return null;
    path = path.slice(root.length + 1);
  }
  path = posix.normalize(path);
  if (path === '..' || path.startsWith('../') || path.startsWith('/') || path === '.') return null;
  if (/(^|\/)(node_modules|site-packages|dist-packages)\//.test(path) || path.startsWith('node:') || path.startsWith('internal/')) return null;
  // A file name has an extension with a letter (`x.ts`, `Makefile` excepted by design): not `127.0.0.1`, not `12`.
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (!/\.[A-Za-z][A-Za-z0-9]*$/.test(base)) return null;
  return path;
}
