import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

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

  /**
   * Webhook delivery attempts by how they ended (delivered, retry, failed), and deliveries
   * never made because their hook had too many waiting (dropped).
   */
  readonly webhookDeliveries = new Counter({
    name: 'agentry_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome (delivered, retry, failed), and deliveries dropped',
    labelNames: ['outcome'] as const,
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

  /** Read when scraped: the events stored so far, from the function given to {@link countEvents}. */
  private eventsNow: () => number = () => 0;
  private eventsCounted = 0;
  readonly eventsIngested: Counter = new Counter({
    name: 'agentry_events_ingested_total',
    help: 'Events agents reported (POST /v1/events) and were stored, duplicates left out',
    registers: [this.registry],
    collect: (): void => {
      const now = this.eventsNow();
      this.eventsIngested.inc(now - this.eventsCounted);
      this.eventsCounted = now;
    },
  });

  /** Where the events counter reads how many events were stored since the process started. */
  countEvents(count: () => number): void {
    this.eventsNow = count;
  }

  /** Read when scraped from the function given to {@link countStreams}. */
  private streamsNow: () => number = () => 0;
  readonly streams: Gauge = new Gauge({
    name: 'agentry_activity_streams',
    help: 'Activity streams (Server-Sent Events) open in this process',
    registers: [this.registry],
    collect: (): void => this.streams.set(this.streamsNow()),
  });

  /** Where the streams gauge reads its value. */
  countStreams(count: () => number): void {
    this.streamsNow = count;
  }

  /** Where the held-polls gauge reads its value. */
  countHeldPolls(count: () => number): void {
    this.heldPollsNow = count;
  }

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
