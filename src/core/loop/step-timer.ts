/** Milliseconds per step of some work, for the debug log (where the start of a loop goes). */
export interface StepTimer {
  /** Ends the step under way, named `step`, and begins the next. */
  mark(step: string): void;
  /** "step 12 ms, next 3 ms, …" */
  summary(): string;
  /** Milliseconds since the timer began. */
  total(): number;
}

export function stepTimer(): StepTimer {
  const marks: string[] = [];
  const began = performance.now();
  let last = began;
  return {
    mark(step) {
      const now = performance.now();
      marks.push(`${step} ${Math.round(now - last)} ms`);
      last = now;
    },
    summary: () => marks.join(', '),
    total: () => Math.round(performance.now() - began),
  };
}
