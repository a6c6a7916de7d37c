import { beforeAll } from 'vitest';
import { readyDefault } from './needs.js';

// Runs before each integration file's own hooks, once the file is collected (so its needs(...)
// call, if any, has been made): a file without one still gets the stack it used to (needs.ts).
beforeAll(() => readyDefault(), 3_600_000);
