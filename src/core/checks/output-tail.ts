/**
 * The last `maxBytes` of a stream of chunks, never holding more than that plus one chunk: a
 * check that prints 100 MB costs Forge 64 KiB, not 100 MB.
 */
export class OutputTail {
  private chunks: Buffer[] = [];
  private held = 0;
  private seen = 0;
  private mostHeld = 0;

  constructor(readonly maxBytes: number) {
    if (!(maxBytes > 0) || !Number.isInteger(maxBytes)) throw new RangeError(`maxOutputBytes must be a positive integer, not ${maxBytes}`);
  }

  push(chunk: Buffer): void {
    this.seen += chunk.length;
    // A chunk larger than the whole tail keeps only its end.
    const kept = chunk.length > this.maxBytes ? chunk.subarray(chunk.length - this.maxBytes) : chunk;
    this.chunks.push(kept);
    this.held += kept.length;
    while (this.chunks.length > 1 && this.held - this.chunks[0]!.length >= this.maxBytes) {
      this.held -= this.chunks.shift()!.length;
    }
    this.mostHeld = Math.max(this.mostHeld, this.held);
  }

  /** Bytes seen in all. */
  get totalBytes(): number {
    return this.seen;
  }

  /** The most bytes held at once (at most maxBytes plus one chunk). */
  get peakHeldBytes(): number {
    return this.mostHeld;
  }

  get truncated(): boolean {
    return this.seen > this.maxBytes;
  }

  /** The tail as text; a character cut in two at the start is dropped. */
  text(): string {
    const all = Buffer.concat(this.chunks);
    const tail = all.length > this.maxBytes ? all.subarray(all.length - this.maxBytes) : all;
    let start = 0;
    // Skip UTF-8 continuation bytes (10xxxxxx) a cut left at the start, at most 3.
    if (this.truncated) while (start < Math.min(3, tail.length) && (tail[start]! & 0xc0) === 0x80) start++;
    return tail.subarray(start).toString('utf8');
  }
}
