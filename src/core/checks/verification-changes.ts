/**
 * Whether a loop's branch changed what its checks run (issue 27): the agent must not make a
 * check pass by weakening it. Pure: the caller gives the files changed since the loop's base and
 * the manifests' text at the base and in the delivered work.
 *
 * A change to the verification is:
 * - a file a command check names (`node test.js`, `bash scripts/verify.sh`) modified or deleted;
 * - the package.json script a check invokes (`npm test`, `npm run lint`, `yarn x`, `pnpm x`,
 *   with its `pre`/`post` scripts) changed or removed;
 * - the Makefile target a check invokes (`make`, `make check`) changed or removed;
 * - a test file or test-runner configuration that existed at the base modified, deleted or
 *   renamed (new test files are free: adding tests never weakens a check).
 * A plan allows such changes with a line `Allow verification changes` in its Verification part.
 */
import { posix } from 'node:path';
import type { CheckSpec } from './types';

export interface ChangedPath {
  /** A added, M modified, D deleted, R renamed, C copied, T type changed. */
  status: string;
  path: string;
  /** The path at the base, for a rename or copy. */
  oldPath?: string;
}

export interface VerificationChange {
  /** The file, relative to the repository root. */
  file: string;
  /** One sentence: what changed and which check it touches. */
  what: string;
}

export interface VerificationInputs {
  checks: readonly CheckSpec[];
  changed: readonly ChangedPath[];
  /** Text of a file at the base and in the delivered work (null: absent), for the manifests a check uses. */
  textAt(path: string): { base: string | null; now: string | null };
}

/** A line of a plan's Verification part that allows the loop to change the verification. */
const ALLOW_LINE = /^\s*(?:(?:[-*+]|\d{1,9}[.)])\s+)?allow verification changes\b/im;

export function allowsVerificationChanges(verification: string | null): boolean {
  return verification !== null && ALLOW_LINE.test(verification);
}

/** Test files by convention (JavaScript, TypeScript, Python, Go, Ruby, Rust, Java). */
const TEST_FILE = /(^|\/)(tests?|__tests__|specs?)\/|(^|\/)[^/]+[._-](test|spec)\.[A-Za-z0-9]+$|(^|\/)test_[^/]+\.py$|(^|\/)[^/]+_test\.(go|py|rb)$|(^|\/)[^/]+Test\.java$|(^|\/)conftest\.py$/;
/** Test-runner configuration. */
const TEST_CONFIG = /(^|\/)(\.mocharc(\.[a-z]+)?|jest\.config\.[a-z]+|vitest\.config\.[a-z]+|karma\.conf\.[a-z]+|ava\.config\.[a-z]+|pytest\.ini|tox\.ini|\.nycrc(\.[a-z]+)?|phpunit\.xml(\.dist)?)$/;

export function isTestPath(path: string): boolean {
  return TEST_FILE.test(path) || TEST_CONFIG.test(path);
}

/** The words of a shell command, roughly: split on blanks and shell operators, quotes removed. */
function shellWords(command: string): string[][] {
  return command
    .split(/\n|&&|\|\||;|\||&/)
    .map((part) =>
      (part.match(/"[^"]*"|'[^']*'|[^\s"']+/g) ?? []).map((w) => w.replace(/^["']|["']$/g, '')).filter((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w)),
    )
    .filter((words) => words.length > 0);
}

/** The package.json scripts a command runs (`npm test` → test, pretest, posttest). */
function npmScripts(words: string[]): string[] {
  const [tool, ...rest] = words;
  const args = rest.filter((w) => !w.startsWith('-'));
  let name: string | undefined;
  if (tool === 'npm') {
    const [verb, script] = args;
    if (verb === 'test' || verb === 't' || verb === 'tst') name = 'test';
    else if (verb === 'start' || verb === 'stop' || verb === 'restart') name = verb;
    else if (verb === 'run' || verb === 'run-script' || verb === 'rum' || verb === 'urn') name = script;
  } else if (tool === 'yarn' || tool === 'pnpm' || tool === 'bun') {
    const [verb, script] = args;
    name = verb === 'run' ? script : verb;
    if (name === 'install' || name === 'add' || name === 'exec' || name === 'dlx' || name === 'x') name = undefined;
  }
  return name ? [name, `pre${name}`, `post${name}`] : [];
}

/** The make targets a command runs (`make` → the default target, written ''). */
function makeTargets(words: string[]): string[] | null {
  if (words[0] !== 'make' && words[0] !== 'gmake') return null;
  const targets = words.slice(1).filter((w) => !w.startsWith('-') && !w.includes('='));
  return targets.length > 0 ? targets : [''];
}

function scriptsOf(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  try {
    const parsed = JSON.parse(text) as { scripts?: unknown };
    return parsed.scripts && typeof parsed.scripts === 'object' ? (parsed.scripts as Record<string, unknown>) : {};
  } catch {
    return null;
  }
}

/** A Makefile target's rule (its line and recipe), or null; '' is the first target. */
export function makeRule(text: string | null, target: string): string | null {
  if (text === null) return null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^([^\t#:=][^:=]*?)\s*::?(?!=)(.*)$/.exec(lines[i]!);
    if (!m) continue;
    const names = m[1]!.trim().split(/\s+/);
    if (names.every((n) => n.startsWith('.'))) continue;
    if (target !== '' && !names.includes(target)) continue;
    const rule = [lines[i]!];
    for (let j = i + 1; j < lines.length && (lines[j]!.startsWith('\t') || lines[j]!.trim() === ''); j++) rule.push(lines[j]!);
    return rule.join('\n').trimEnd();
  }
  return null;
}

const MAKEFILES = ['GNUmakefile', 'makefile', 'Makefile'];

/** What the branch changed of what the checks run; empty when nothing. */
export function detectVerificationChanges(inputs: VerificationInputs): VerificationChange[] {
  const out: VerificationChange[] = [];
  const seen = new Set<string>();
  const add = (file: string, what: string) => {
    const key = `${file}\0${what}`;
    if (seen.has(key)) return;
    seen.add(key);
    out.push({ file, what });
  };
  const changedAtBase = new Map<string, ChangedPath>();
  for (const c of inputs.changed) {
    if (c.status === 'A' || c.status === 'C') continue;
    changedAtBase.set(c.status === 'R' ? (c.oldPath ?? c.path) : c.path, c);
  }
  const describe = (c: ChangedPath) => (c.status === 'D' ? 'deleted' : c.status === 'R' ? `renamed to ${c.path}` : 'modified');
  for (const spec of inputs.checks) {
    if (spec.kind !== 'command') continue;
    for (const words of shellWords(spec.command)) {
      for (const word of words) {
        const path = posix.normalize(word);
        const c = changedAtBase.get(path);
        if (c && !path.startsWith('../')) add(path, `${path}, which ${spec.label} names, was ${describe(c)}`);
      }
      for (const script of npmScripts(words)) {
        const { base, now } = inputs.textAt('package.json');
        const before = scriptsOf(base)?.[script];
        const after = scriptsOf(now)?.[script];
        if (before === undefined && after === undefined) continue;
        if (JSON.stringify(before) === JSON.stringify(after)) continue;
        const was = before === undefined ? 'was added' : after === undefined ? `was removed (it was ${JSON.stringify(before)})` : `changed from ${JSON.stringify(before)} to ${JSON.stringify(after)}`;
        add('package.json', `the package.json script "${script}", which ${spec.label} runs, ${was}`);
      }
      const targets = makeTargets(words);
      if (targets) {
        const file = MAKEFILES.find((f) => inputs.textAt(f).base !== null) ?? MAKEFILES.find((f) => inputs.textAt(f).now !== null);
        if (!file) continue;
        const { base, now } = inputs.textAt(file);
        for (const target of targets) {
          const before = makeRule(base, target);
          const after = makeRule(now, target);
          if (before === after) continue;
          const name = target === '' ? 'the default target' : `the target "${target}"`;
          add(file, `${name} of ${file}, which ${spec.label} runs, ${before === null ? 'was added' : after === null ? 'was removed' : 'changed'}`);
        }
      }
    }
  }
  for (const [path, c] of changedAtBase) {
    if (isTestPath(path)) add(path, `${path}, a test file that existed at the loop's base, was ${describe(c)}`);
  }
  return out;
}
