/**
 * CRC-32 (IEEE 802.3, the zlib polynomial) over a byte range.
 *
 * Implemented here rather than taken from `node:zlib` because `zlib.crc32`
 * only exists from Node 20.15 / 22.2, and the extension host's Node version is
 * chosen by the user's VS Code, not by us.
 */
function buildCrcTable(): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}

const CRC_TABLE = buildCrcTable(); // immutable lookup table, not mutable state

export function crc32(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let crc = 0xffffffff;
  for (let i = start; i < end; i++) crc = CRC_TABLE[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
