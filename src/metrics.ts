import { Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The process's Prometheus registry and the instruments the code records into. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'agentry_http_request_duration_seconds',
    help: 'HTTP request latency by method, route and status code',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });

  /** Read when scraped from the function given to {@link countHeldPolls}. */
  private heldPollsNow: () => number = () => 0;
  readonly heldPolls: Gauge = new Gauge({
    name: 'agentry_mailbox_held_polls',
    help: 'Mailbox polls held open, waiting for a message',
    registers: [this.registry],
    collect: (): void => this.heldPolls.set(this.heldPollsNow()),
  });

  /** Where the held-polls gauge reads its value. */
  countHeldPolls(count: () => number): void {
    this.heldPollsNow = count;
  }

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
