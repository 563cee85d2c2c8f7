/**
 * Whether a process about to start (or restart) a loop asks the data folder's engine to supervise
 * it, and what the engine's answer means for it. Pure: the host (a VS Code window) does the I/O —
 * reading its setting, connecting, sending — and acts on the outcome.
 */
import type { LoopRef } from '../loop/runtime-types';
import type { EngineInfo, EngineReply } from './protocol';

/** Why the asking process supervises the loop itself. */
export type SuperviseHereReason =
  /** forge.engine.shareProcess is off. */
  | 'sharing-off'
  /** This process is the data folder's engine: its loops are its own. */
  | 'this-process'
  /** No engine answered (none, a stale socket, a dead process, a refused greeting). */
  | 'no-engine'
  /** The engine declined before touching anything (other settings, another version, closing). */
  | 'declined';

export type HandOverPlan = { action: 'supervise'; why: SuperviseHereReason } | { action: 'ask' };

/** Before any I/O: ask the engine only when sharing is on and this process is not the engine itself. */
export function planHandOver(input: { shareProcess: boolean; selfIsEngine: boolean }): HandOverPlan {
  if (!input.shareProcess) return { action: 'supervise', why: 'sharing-off' };
  if (input.selfIsEngine) return { action: 'supervise', why: 'this-process' };
  return { action: 'ask' };
}

export type HandOverOutcome =
  | { action: 'handed'; ref: LoopRef; engine: EngineInfo; /** What the engine's start said to tell the user (an UNCONFINED loop above all). */ notices: string[] }
  /** `detail`: the engine's own words when it declined. */
  | { action: 'supervise'; why: SuperviseHereReason; detail?: string }
  /**
   * The engine's runtime refused the loop itself (a bad plan, a name in use …: this process would
   * refuse it too), or the engine went away in the middle of the start (it may have started the
   * loop: starting it here could make a second one). The caller reports it and starts nothing.
   */
  | { action: 'fail'; code: string; message: string };

type FirstAnswer = Extract<EngineReply, { type: 'accepted' | 'refused' | 'error' }>;

/** What the engine's first answer to a start or restart means; null: no engine answered. */
export function judgeHandOverAnswer(answer: FirstAnswer | null, engine: EngineInfo | null): HandOverOutcome {
  if (!answer || !engine) return { action: 'supervise', why: 'no-engine' };
  switch (answer.type) {
    case 'accepted':
      return { action: 'handed', ref: answer.ref, engine, notices: answer.notices ?? [] };
    case 'refused':
      // Every refusal comes before the engine touched the loop: supervising it here is safe.
      return { action: 'supervise', why: 'declined', detail: answer.message };
    case 'error':
      return { action: 'fail', code: answer.code, message: answer.message };
  }
}

