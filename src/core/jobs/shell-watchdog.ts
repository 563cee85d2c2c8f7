/**
 * The shell-hang watchdog (issue 16): separate from the session stall watchdog (which aborts a
 * whole session that makes no progress), this one unblocks one builtin `bash` tool call.
 *
 * Each builtin shell call is stamped by the loop's agent shell (`renderWatchdogStamp`): a fresh
 * `FORGE_WATCHDOG_MARK` in its environment, inherited by everything it starts, and its command
 * registered under that marker in the loop's calls folder. The loop's event stream times each
 * bash tool call from its start to its end. A call still open past the threshold is matched to
 * its registration (same command, registered after the call started), and its marked processes
 * are killed: the pipes close, so the call returns with what it printed and the session goes
 * on. In `dry-run` the processes are listed and recorded, nothing is killed; `off` does nothing.
 * Every intervention is recorded (table `shell_interventions`), logged and shown as a notice.
 */
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import type { AgentEvent } from '../opencode/agent-client';
import { findMarkedProcesses, signalMarkedProcesses } from '../process/marked-processes';
import type { InterventionProcess, NewShellIntervention } from '../storage/repositories';
import { WATCHDOG_MARKER_VARIABLE } from './job-core';

export type WatchdogMode = 'kill' | 'dry-run' | 'off';

/** The protection floor of `forge.watchdog.stallMs`: a user setting never goes below it. */
export const WATCHDOG_FLOOR_MS = 60_000;

/** The threshold in force: the setting, raised to the floor (tests lower the floor through an engine option only). */
export function effectiveStallMs(settingMs: number, floorMs: number = WATCHDOG_FLOOR_MS): number {
  return Math.max(floorMs, settingMs);
}

export interface OpenShellCall {
  callId: string;
  sessionId: string;
  command: string;
  startedAt: number;
}

export interface CallRegistration {
  mark: string;
  command: string;
  registeredAt: number;
}

/** Calls open for at least `stallMs` that were not handled yet. */
export function overdueCalls(calls: Iterable<OpenShellCall>, handled: ReadonlySet<string>, now: number, stallMs: number): OpenShellCall[] {
  return [...calls].filter((c) => !handled.has(c.callId) && now - c.startedAt >= stallMs);
}

/**
 * The registrations of a call: its exact command, registered after it started (1 s of slack
 * for clock granularity). Two identical commands started together match both (said in docs/shell-tools.md).
 */
export function registrationsOf(call: OpenShellCall, registrations: readonly CallRegistration[]): CallRegistration[] {
  return registrations.filter((r) => r.command === call.command && r.registeredAt >= call.startedAt - 1000);
}

export interface ShellWatchdogOptions {
  loopName: string;
  callsDir: string;
  mode: WatchdogMode;
  stallMs: number;
  record: (row: NewShellIntervention) => void;
  notice: (level: 'warning' | 'info', message: string) => void;
  log: (message: string) => void;
  /** Tick period (default: a quarter of the threshold, between 100 ms and 5 s). */
  tickMs?: number;
}

const BASH_TOOLS = new Set(['bash', 'shell']);

export class ShellWatchdog {
  private readonly open = new Map<string, OpenShellCall>();
  private readonly handled = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ShellWatchdogOptions) {
    if (options.mode === 'off') return;
    const every = options.tickMs ?? Math.max(100, Math.min(5000, Math.floor(options.stallMs / 4)));
    this.timer = setInterval(() => this.tick(), every);
    this.timer.unref?.();
  }

  observe(event: AgentEvent): void {
    if (this.options.mode === 'off' || event.type !== 'activity' || event.kind !== 'tool' || !event.callId || !BASH_TOOLS.has(event.tool ?? '')) return;
    const id = event.callId;
    if (event.toolStatus === 'pending' || event.toolStatus === 'running') {
      const command = typeof event.toolInput?.command === 'string' ? event.toolInput.command : undefined;
      const known = this.open.get(id);
      if (!known) this.open.set(id, { callId: id, sessionId: event.sessionId, command: command ?? '', startedAt: Date.now() });
      else if (command && !known.command) known.command = command;
    } else {
      this.open.delete(id);
      this.handled.delete(id);
    }
  }

  tick(now: number = Date.now()): void {
    const due = overdueCalls(this.open.values(), this.handled, now, this.options.stallMs);
    if (due.length === 0) {
      this.pruneRegistrations(now);
      return;
    }
    const registrations = this.readRegistrations();
    for (const call of due) {
      this.handled.add(call.callId);
      const mine = registrationsOf(call, registrations);
      const processes: InterventionProcess[] = mine.flatMap((r) => findMarkedProcesses(WATCHDOG_MARKER_VARIABLE, r.mark));
      const elapsedMs = now - call.startedAt;
      let action: NewShellIntervention['action'];
      if (processes.length === 0) action = 'unresolved';
      else if (this.options.mode === 'dry-run') action = 'dry-run';
      else {
        for (const r of mine) signalMarkedProcesses(WATCHDOG_MARKER_VARIABLE, r.mark, 'SIGKILL');
        action = 'killed';
      }
      for (const r of mine) if (action === 'killed') this.removeRegistration(r.mark);
      const what = `a bash call of loop ${this.options.loopName} ran ${Math.round(elapsedMs / 1000)} s (threshold ${Math.round(this.options.stallMs / 1000)} s): ${JSON.stringify(call.command.slice(0, 200))}`;
      const list = processes.map((p) => `${p.pid} ${p.command.slice(0, 120)}`).join('; ');
      const message =
        action === 'killed'
          ? `Shell-hang watchdog: ${what} — killed ${processes.length} process(es) so the call returns (${list}).`
          : action === 'dry-run'
            ? `Shell-hang watchdog (dry-run): ${what} — would kill ${processes.length} process(es): ${list}. Nothing was killed.`
            : `Shell-hang watchdog: ${what} — no process of it was found to kill (unresolved).`;
      this.options.log(message);
      this.options.notice(action === 'dry-run' ? 'info' : 'warning', message);
      try {
        this.options.record({
          loopName: this.options.loopName,
          sessionId: call.sessionId,
          callId: call.callId,
          command: call.command,
          mode: this.options.mode,
          action,
          elapsedMs,
          thresholdMs: this.options.stallMs,
          processes,
        });
      } catch (error) {
        this.options.log(`Shell-hang watchdog: could not record the intervention: ${String(error)}`);
      }
    }
  }

  dispose(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.open.clear();
  }

  private readRegistrations(): CallRegistration[] {
    let names: string[];
    try {
      names = readdirSync(this.options.callsDir);
    } catch {
      return [];
    }
    const out: CallRegistration[] = [];
    for (const mark of names) {
      try {
        const file = path.join(this.options.callsDir, mark);
        out.push({ mark, command: readFileSync(file, 'utf8'), registeredAt: statSync(file).mtimeMs });
      } catch {
        /* removed meanwhile */
      }
    }
    return out;
  }

  /** Registrations of calls long over (twice the threshold, and no open call that old) are dropped. */
  private pruneRegistrations(now: number): void {
    const oldestOpen = Math.min(now, ...[...this.open.values()].map((c) => c.startedAt));
    const cutoff = Math.min(oldestOpen - 1000, now - 2 * this.options.stallMs);
    let names: string[];
    try {
      names = readdirSync(this.options.callsDir);
    } catch {
      return;
    }
    for (const mark of names) {
      try {
        if (statSync(path.join(this.options.callsDir, mark)).mtimeMs < cutoff) this.removeRegistration(mark);
      } catch {
        /* gone */
      }
    }
  }

  private removeRegistration(mark: string): void {
    rmSync(path.join(this.options.callsDir, mark), { force: true });
  }
}
