import { parentPort, workerData } from 'node:worker_threads';
import { makeBodies, type BodyJob } from './bodies.js';

const { job, from, to } = workerData as { job: BodyJob; from: number; to: number };
parentPort!.postMessage(makeBodies(job, from, to));
