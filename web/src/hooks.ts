// The one way the pages load and the one way they act. A 401 answer to either ends the
// session in `api`, which puts the sign-in form in place of the page.

import { useEffect, useRef, useState } from 'preact/hooks';

/** An error's own message, the sentence a page shows for a failure unless told otherwise. */
export function messageOf(err: unknown): string {
  return (err as Error).message;
}

/**
 * Loads something when the component mounts, again when `deps` change or on `reload`. Until
 * the first answer `value` is undefined; a later load keeps the old value meanwhile. A failure
 * is `error`, the error's message.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [value, setValue] = useState<T | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setError(undefined);
    load().then(
      (v) => live && setValue(v),
      (err: unknown) => live && setError(messageOf(err)),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { value, error, reload: () => setTick((t) => t + 1) };
}

/**
 * Calls `act` every `ms` while the component is mounted: for what goes stale by itself, such
 * as statuses and "5 min ago".
 */
export function useEvery(ms: number, act: () => void): void {
  const latest = useRef(act);
  latest.current = act;
  useEffect(() => {
    const timer = setInterval(() => latest.current(), ms);
    return () => clearInterval(timer);
  }, [ms]);
}

export interface ActionOptions {
  /** The sentence shown for a failure; the error's own message by default. */
  explain?: (err: unknown) => string;
  /** Where a failure is told instead of the action's own `error`, such as a page's notice. */
  onError?: (message: string) => void;
}

/**
 * A change the page makes: `run` does it with `busy` set meanwhile, clearing the last failure
 * first, and turns a thrown error (a refused call, or a check of the form) into `error`.
 * `submit` is the same as a form's submit handler.
 */
export function useAction(options: ActionOptions = {}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const run = async (act: () => Promise<void>): Promise<void> => {
    setBusy(true);
    setError(undefined);
    try {
      await act();
    } catch (err) {
      const message = (options.explain ?? messageOf)(err);
      if (options.onError) options.onError(message);
      else setError(message);
    } finally {
      setBusy(false);
    }
  };
  const submit = (act: () => Promise<void>) => (event: Event) => {
    event.preventDefault();
    void run(act);
  };
  return { busy, error, run, submit };
}
