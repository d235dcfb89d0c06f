import { useState } from 'preact/hooks';
import { WEBHOOK_KINDS } from '../../../src/wire/webhook-kinds';
import { api, encode, type NewWebhook, type Webhook, type WebhookDelivery } from '../api';
import { useAction, useLoad } from '../hooks';
import { ConfirmButton, Copy, Moment } from '../widgets';

/**
 * The user's webhooks (docs/webhooks.md): make one (a URL the server would never deliver to
 * is refused, with the reason), test one, and see its recent deliveries with what each sent
 * and was answered, as GitHub's "Recent deliveries"; any of them can be sent again.
 */
export function WebhooksPage() {
  const hooks = useLoad(() => api<Webhook[]>('GET', '/v2/webhooks'), []);
  const [shown, setShown] = useState<string | undefined>();
  const [tick, setTick] = useState(0);
  const act = useAction();
  const test = (id: string) =>
    act.run(async () => {
      await api('POST', `/v2/webhooks/${encode(id)}/test`);
      setShown(id);
      setTick((n) => n + 1);
    });
  const remove = (id: string) =>
    act.run(async () => {
      await api('DELETE', `/v2/webhooks/${encode(id)}`);
      if (shown === id) setShown(undefined);
      hooks.reload();
    });
  const current = hooks.value?.find((hook) => hook.id === shown);
  return (
    <>
      <NewWebhookCard onCreated={() => hooks.reload()} />
      <section class="card">
        <h2>Webhooks</h2>
        {hooks.error && <p class="error">{hooks.error}</p>}
        {act.error && <p class="error">{act.error}</p>}
        {hooks.value && hooks.value.length === 0 && <p>No webhook yet.</p>}
        {hooks.value && hooks.value.length > 0 && (
          <table data-testid="webhooks">
            <thead>
              <tr>
                <th>URL</th>
                <th>Kinds</th>
                <th>Agents</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {hooks.value.map((hook) => (
                <tr key={hook.id} data-webhook={hook.id}>
                  <td class="mono">
                    {hook.url}
                    {hook.description && <div class="status">{hook.description}</div>}
                  </td>
                  <td>{hook.kinds.join(', ')}</td>
                  <td class="mono">{hook.agents === null ? 'all' : hook.agents.join(', ')}</td>
                  <td>
                    <Moment iso={hook.created_at} />
                  </td>
                  <td>
                    <button type="button" class="secondary" onClick={() => setShown(hook.id)}>
                      Deliveries
                    </button>{' '}
                    <button
                      type="button"
                      class="secondary"
                      disabled={act.busy}
                      onClick={() => test(hook.id)}
                    >
                      Test
                    </button>{' '}
                    <ConfirmButton
                      label="Delete…"
                      question="Delete it and its deliveries?"
                      action="Delete"
                      onConfirm={() => remove(hook.id)}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      {current && <Deliveries hook={current} tick={tick} />}
    </>
  );
}

function NewWebhookCard(props: { onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [kinds, setKinds] = useState<string[]>([]);
  const [description, setDescription] = useState('');
  const [created, setCreated] = useState<NewWebhook | undefined>();
  const act = useAction();
  const create = act.submit(async () => {
    setCreated(undefined);
    const hook = await api<NewWebhook>('POST', '/v2/webhooks', {
      url,
      kinds,
      description: description || null,
    });
    setCreated(hook);
    setUrl('');
    setKinds([]);
    setDescription('');
    props.onCreated();
  });
  const toggle = (kind: string, on: boolean) =>
    setKinds((now) => (on ? [...now, kind] : now.filter((k) => k !== kind)));
  return (
    <section class="card">
      <h2>New webhook</h2>
      <form onSubmit={create}>
        <div class="filters">
          <input
            name="url"
            type="url"
            required
            placeholder="https://ops.example.com/agentry"
            aria-label="URL"
            value={url}
            onInput={(e) => setUrl((e.target as HTMLInputElement).value)}
          />
          <input
            name="description"
            placeholder="What is it for?"
            aria-label="Description"
            value={description}
            onInput={(e) => setDescription((e.target as HTMLInputElement).value)}
          />
        </div>
        <fieldset class="kinds">
          <legend>Tell it of</legend>
          {WEBHOOK_KINDS.map((kind) => (
            <label key={kind}>
              <input
                type="checkbox"
                name="kinds"
                value={kind}
                checked={kinds.includes(kind)}
                onChange={(e) => toggle(kind, (e.target as HTMLInputElement).checked)}
              />{' '}
              <code>{kind}</code>
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={act.busy || kinds.length === 0}>
          Create webhook
        </button>
      </form>
      {act.error && (
        <p class="error" role="alert">
          {act.error}
        </p>
      )}
      {created && (
        <div class="once" role="status">
          <p>
            Webhook made. Its signing secret, shown this once only (docs/webhooks.md says how to
            check a delivery with it):
          </p>
          <code data-testid="new-secret">{created.secret}</code>{' '}
          <Copy text={created.secret} what="secret" />
        </div>
      )}
    </section>
  );
}

/** A hook's recent deliveries, newest first, each opening to its request and response. */
function Deliveries(props: { hook: Webhook; tick: number }) {
  const { hook } = props;
  const deliveries = useLoad(
    () => api<WebhookDelivery[]>('GET', `/v2/webhooks/${encode(hook.id)}/deliveries?limit=50`),
    [hook.id, props.tick],
  );
  const act = useAction();
  const redeliver = (delivery: string) =>
    act.run(async () => {
      await api('POST', `/v2/webhooks/${encode(hook.id)}/deliveries/${encode(delivery)}/redeliver`);
      deliveries.reload();
    });
  return (
    <section class="card" data-testid="webhook-deliveries">
      <h2>
        Recent deliveries <span class="mono status">{hook.url}</span>
      </h2>
      <p>
        <button type="button" class="secondary" onClick={() => deliveries.reload()}>
          Refresh
        </button>
      </p>
      {deliveries.error && <p class="error">{deliveries.error}</p>}
      {act.error && <p class="error">{act.error}</p>}
      {deliveries.value && deliveries.value.length === 0 && <p>No delivery yet.</p>}
      {deliveries.value?.map((delivery) => (
        <details key={delivery.id} class="delivery" data-delivery={delivery.id}>
          <summary>
            <span
              class={
                delivery.status === 'failed'
                  ? 'error'
                  : delivery.status === 'delivered'
                    ? 'ok'
                    : 'status'
              }
            >
              {delivery.status}
            </span>{' '}
            <code>{delivery.kind}</code>{' '}
            {delivery.status_code !== null && <span>answered {delivery.status_code}</span>}{' '}
            {delivery.duration_ms !== null && <span>in {delivery.duration_ms} ms</span>}{' '}
            <Moment iso={delivery.created_at} />
            {delivery.redelivery_of && <span class="status"> · redelivery</span>}
          </summary>
          <DeliveryDetail delivery={delivery} />
          <p>
            <button
              type="button"
              class="secondary"
              disabled={act.busy}
              onClick={() => redeliver(delivery.id)}
            >
              Redeliver
            </button>
          </p>
        </details>
      ))}
    </section>
  );
}

function DeliveryDetail(props: { delivery: WebhookDelivery }) {
  const { delivery: d } = props;
  return (
    <div class="exchange">
      <p class="mono status">
        {d.id} · attempt {d.attempts}
        {d.agent ? ` · ${d.agent}` : ''}
        {d.redelivery_of ? ` · sends ${d.redelivery_of} again` : ''}
        {d.next_attempt_at ? ` · next attempt ` : ''}
        {d.next_attempt_at && <Moment iso={d.next_attempt_at} />}
      </p>
      {d.error && <p class="error">{d.error}</p>}
      <h3>Request</h3>
      {d.request ? (
        <>
          <Headers headers={d.request.headers} />
          <pre data-testid="request-body">{pretty(d.request.body)}</pre>
        </>
      ) : (
        <p>Not sent yet.</p>
      )}
      <h3>Response</h3>
      {d.response ? (
        <>
          <p>Status {d.response.status_code}</p>
          <Headers headers={d.response.headers} />
          <pre data-testid="response-body">{d.response.body || '(empty)'}</pre>
        </>
      ) : (
        <p>No answer.</p>
      )}
    </div>
  );
}

function Headers(props: { headers: Record<string, string> }) {
  return (
    <pre class="headers">
      {Object.entries(props.headers)
        .map(([name, value]) => `${name}: ${value}`)
        .join('\n')}
    </pre>
  );
}

/** A JSON body indented to be read; any other text as it is. */
function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
