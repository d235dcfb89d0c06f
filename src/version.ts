import { createRequire } from 'node:module';

/** Agentry's version, as package.json says: src/ and dist/ are both one level below it. */
export const { version } = createRequire(import.meta.url)('../package.json') as {
  version: string;
};
