/**
 * The port behind Forge's agent tools: what each tool means. The MCP tool server validates
 * arguments and checks the caller's role, then hands the call here. The loop engine implements
 * it over storage (`src/core/loop/tool-backend.ts`).
 */
import type {
  ForgeAgentRole,
  JobsArgs,
  ShellArgs,
  FeaturesWriteArgs,
  LoopHandoffArgs,
  PlanAdjustArgs,
  PlanEditArgs,
  PlanReadArgs,
  PlanWriteArgs,
  ReviewDeleteArgs,
  ReviewReadArgs,
  ReviewReplyArgs,
  ReviewWriteArgs,
  SectionReadArgs,
} from './forge-tools';

/** Who is calling: every tool call knows its loop and the role of the calling agent. */
export interface ForgeToolCaller {
  /** The loop the call belongs to; null for a planning (architect) scope outside any loop. */
  loopName: string | null;
  role: ForgeAgentRole;
  /** opencode session of the caller when known (the loop's current session). */
  sessionId: string | undefined;
  /** Free-form scope key for non-loop scopes (e.g. the planning session's key). */
  scopeKey?: string;
}

/** A refusal or failure whose message is meant for the agent (it is returned as the tool's error). */
export class ForgeToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ForgeToolError';
  }
}

/** Each method returns the text the agent sees, or throws `ForgeToolError` to refuse. */
export interface ForgeToolBackend {
  reviewWrite(caller: ForgeToolCaller, args: ReviewWriteArgs): Promise<string>;
  reviewRead(caller: ForgeToolCaller, args: ReviewReadArgs): Promise<string>;
  reviewDelete(caller: ForgeToolCaller, args: ReviewDeleteArgs): Promise<string>;
  /** `forge_review_reply`: the coder's answer to a user's review comment (stored; the comment stays open). */
  reviewReply(caller: ForgeToolCaller, args: ReviewReplyArgs): Promise<string>;
  planRead(caller: ForgeToolCaller, args: PlanReadArgs): Promise<string>;
  planWrite(caller: ForgeToolCaller, args: PlanWriteArgs): Promise<string>;
  planEdit(caller: ForgeToolCaller, args: PlanEditArgs): Promise<string>;
  sectionRead(caller: ForgeToolCaller, args: SectionReadArgs): Promise<string>;
  planAdjust(caller: ForgeToolCaller, args: PlanAdjustArgs): Promise<string>;
  loopHandoff(caller: ForgeToolCaller, args: LoopHandoffArgs): Promise<string>;
  /** `forge_shell`: runs a command as one of the loop's jobs (in its sandbox when it has one). */
  shell(caller: ForgeToolCaller, args: ShellArgs): Promise<string>;
  /** `forge_jobs`: lists, polls, reads or kills the loop's jobs. */
  jobs(caller: ForgeToolCaller, args: JobsArgs): Promise<string>;
  /** `forge_features_write`: the feature splitter's split of a PRD (scope key: the split's id). */
  featuresWrite(caller: ForgeToolCaller, args: FeaturesWriteArgs): Promise<string>;
}
