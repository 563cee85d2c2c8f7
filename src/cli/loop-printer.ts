/**
 * What `forge run` prints of its loop, whichever process supervises it (this one, or the data
 * folder's engine it handed the loop to): the loop's runtime events as lines or `--json`
 * objects and, with `--follow`, what its agent does. What the agent left unfinished is printed
 * before the phase change or the end that cut it.
 */
import { FollowLines, type FollowLine } from '../core/live/follow-lines';
import type { LiveFeedEvent } from '../core/live/live-feed';
import type { LoopRuntimeEvent } from '../core/loop/runtime-types';
import { formatEvent } from './format';

export class LoopPrinter {
  private follower: FollowLines | undefined;

  constructor(
    private readonly json: boolean,
    private readonly out: (line: string) => void,
    /** --follow: a setup command's output is printed under its step line. */
    private readonly follow = false,
  ) {}

  /** An event of the live feed (only with --follow). */
  live(e: LiveFeedEvent): void {
    this.follower ??= new FollowLines(e.loop.name);
    this.printFollow(this.follower.onEvent(e));
  }

  event(e: LoopRuntimeEvent): void {
    if (e.type === 'loop.setup_output') {
      // Streamed while the command runs, shown with --follow only.
      const line = this.follow ? formatEvent(e, this.json) : null;
      if (line) this.out(line);
      return;
    }
    if (this.follower && (e.type === 'loop.phase' || e.type === 'loop.ended' || e.type === 'loop.supervision_lost')) this.printFollow(this.follower.flush());
    const line = formatEvent(e, this.json);
    if (line) this.out(line);
  }

  private printFollow(lines: FollowLine[]): void {
    for (const l of lines) this.out(this.json ? JSON.stringify(l.json) : l.text);
  }
}
