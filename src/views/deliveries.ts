import type { DeliveryEventRow } from '../store/repositories/deliveries.js';
import { isoTimestamp } from '../wire/common.js';
import type { DeliveryEventView } from '../wire/deliveries.js';

export function deliveryEventView(row: DeliveryEventRow): DeliveryEventView {
  const number = (value: number | null): number | null => (value == null ? null : Number(value));
  return {
    address: row.address,
    event: row.event as DeliveryEventView['event'],
    at: isoTimestamp(Number(row.at)),
    uuid: row.uuid,
    digest: row.digest,
    sender: row.sender,
    size: number(row.size),
    status_code: number(row.status_code),
    latency_ms: number(row.latency_ms),
    detail: row.detail,
  };
}
