/**
 * zod for the code every process loads (settings, the engine endpoint's protocol): `zod/mini`,
 * not the classic API. Its checks are plain functions a bundler can leave out, so a `forge run`
 * that hands its loop over does not carry all of zod; the classic bundle cost ≈10 MB PSS per
 * process (measured: a bundle importing it, 8 processes at once). `zod/mini` loads no locale of
 * its own: issue messages come from zod's English one, set here once for the process.
 * Import it as a namespace (`import * as z from '…/config/zod'`) so unused parts stay out.
 */
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());

export * from 'zod/mini';
