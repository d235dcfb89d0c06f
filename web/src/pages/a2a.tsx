import { useState } from 'preact/hooks';
import { api, encode } from '../api';
import { useAction, useLoad } from '../hooks';
import { Copy } from '../widgets';

type Access = 'off' | 'private' | 'public';

interface A2aSetting {
  address: string;
  access: Access;
  card_url: string | null;
  url: string | null;
}

const ACCESS_WORDS: Record<Access, string> = {
  off: 'Off: not served over A2A',
  private: 'Private: to callers with an API key of this Agentry',
  public: 'Public: to anyone, and listed in the public index of cards',
};

/**
 * Whether a chat agent is served over A2A (docs/a2a.md), and to whom: the owner chooses, and
 * the agent card's address is shown for A2A clients to be given.
 */
export function A2aPanel(props: { address: string }) {
  const path = `/v2/agents/${encode(props.address)}/a2a`;
  const setting = useLoad(() => api<A2aSetting>('GET', path), [props.address]);
  const [choice, setChoice] = useState<Access | undefined>();
  const save = useAction();
  const current = setting.value;
  if (setting.error) return <p class="error">{setting.error}</p>;
  if (!current) return <p>Loading…</p>;
  const chosen = choice ?? current.access;
  return (
    <section class="card" data-testid="a2a">
      <h3>A2A</h3>
      <p>
        Serve this agent to A2A clients: each A2A message reaches it as a chat message from the
        caller’s chat identity, and its reply is the answer. Only an agent that speaks the chat
        protocol can be served.
      </p>
      <form
        onSubmit={save.submit(async () => {
          await api('PUT', path, { access: chosen });
          setChoice(undefined);
          setting.reload();
        })}
      >
        <label>
          Served
          <select
            name="a2a-access"
            value={chosen}
            onChange={(e) => setChoice((e.target as HTMLSelectElement).value as Access)}
          >
            {(Object.keys(ACCESS_WORDS) as Access[]).map((access) => (
              <option value={access}>{ACCESS_WORDS[access]}</option>
            ))}
          </select>
        </label>
        <button
          type="submit"
          aria-label="Save A2A setting"
          disabled={save.busy || chosen === current.access}
        >
          Save
        </button>
        {save.error && <p class="error">{save.error}</p>}
      </form>
      {current.card_url && (
        <p class="mono" data-testid="a2a-card">
          Agent card: {current.card_url} <Copy text={current.card_url} what="card URL" />
        </p>
      )}
    </section>
  );
}

/**
 * Registers an agent that speaks A2A elsewhere by its card's URL (docs/a2a.md, "Inward"): it
 * gets an address here that uAgents agents reach with the chat protocol; its page opens.
 */
export function AddExternalAgent() {
  const [open, setOpen] = useState(false);
  const [cardUrl, setCardUrl] = useState('');
  const add = useAction();
  if (!open) {
    return (
      <button type="button" class="secondary" onClick={() => setOpen(true)}>
        Add an A2A agent…
      </button>
    );
  }
  return (
    <form
      data-testid="add-a2a-agent"
      onSubmit={add.submit(async () => {
        const made = await api<{ address: string }>('POST', '/v2/a2a/external-agents', {
          card_url: cardUrl.trim(),
        });
        location.hash = `#/agents/${encode(made.address)}`;
      })}
    >
      <p>
        An agent that speaks A2A elsewhere, by the URL of its agent card: it gets an address here,
        and uAgents agents reach it with the chat protocol.
      </p>
      <label>
        Agent card URL
        <input
          name="card-url"
          type="url"
          required
          placeholder="https://example.com/.well-known/agent-card.json"
          value={cardUrl}
          onInput={(e) => setCardUrl((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" disabled={add.busy}>
        Add
      </button>{' '}
      <button type="button" class="secondary" onClick={() => setOpen(false)}>
        Cancel
      </button>
      {add.error && <p class="error">{add.error}</p>}
    </form>
  );
}
