import { useState } from 'preact/hooks';

/** A button for what cannot be undone: it asks first, then acts or is kept. */
export function ConfirmButton(props: {
  /** The button before it asks, such as "Delete agent…". */
  label: string;
  question: string;
  /** The button that acts, such as "Delete agent". */
  action: string;
  onConfirm: () => void;
}) {
  const [asked, setAsked] = useState(false);
  return asked ? (
    <span class="confirm">
      {props.question}{' '}
      <button type="button" class="danger" onClick={props.onConfirm}>
        {props.action}
      </button>{' '}
      <button type="button" class="secondary" onClick={() => setAsked(false)}>
        Keep it
      </button>
    </span>
  ) : (
    <button type="button" class="secondary" onClick={() => setAsked(true)}>
      {props.label}
    </button>
  );
}
