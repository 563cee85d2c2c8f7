/**
 * A `ForgeToolBackend` that records calls and answers with fixed text, for tests of the MCP
 * tool server's validation, authentication and role checks (the real backend over storage is
 * `src/core/loop/tool-backend.ts`).
 */
import { ForgeToolError, type ForgeToolBackend, type ForgeToolCaller } from '../../src/core/opencode/forge-tool-backend';

export interface RecordedToolCall {
  method: keyof ForgeToolBackend;
  caller: ForgeToolCaller;
  args: unknown;
}

export interface RecordingToolBackend extends ForgeToolBackend {
  calls: RecordedToolCall[];
  /** Makes the next call of `method` throw a `ForgeToolError` with this message. */
  refuseNext(method: keyof ForgeToolBackend, message: string): void;
}

export function createRecordingToolBackend(): RecordingToolBackend {
  const calls: RecordedToolCall[] = [];
  const refusals = new Map<keyof ForgeToolBackend, string>();
  const record = (method: keyof ForgeToolBackend) => async (caller: ForgeToolCaller, args: unknown) => {
    calls.push({ method, caller, args });
    const refusal = refusals.get(method);
    if (refusal !== undefined) {
      refusals.delete(method);
      throw new ForgeToolError(refusal);
    }
    return `${method} ok`;
  };
  return {
    calls,
    refuseNext: (method, message) => refusals.set(method, message),
    reviewWrite: record('reviewWrite'),
    reviewRead: record('reviewRead'),
    reviewDelete: record('reviewDelete'),
    reviewReply: record('reviewReply'),
    planRead: record('planRead'),
    planWrite: record('planWrite'),
    planEdit: record('planEdit'),
    sectionRead: record('sectionRead'),
    planAdjust: record('planAdjust'),
    loopHandoff: record('loopHandoff'),
    shell: record('shell'),
    jobs: record('jobs'),
    featuresWrite: record('featuresWrite'),
  };
}
