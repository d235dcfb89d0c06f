import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type HostedCode as SavedCode } from '../api';
import type { FileEditor } from '../editor';
import { messageOf, useAction, useLoad } from '../hooks';

/** One file of a hosted agent's code, as the hosting API keeps it. */
export interface CodeFile {
  name: string;
  value: string;
  language: string;
}

/** The file the agent is started from: it cannot be renamed or deleted. */
const MAIN_FILE = 'agent.py';

/** What a new agent's code starts as: `agent` is made by Agentry before the file runs. */
export const STARTER: CodeFile[] = [
  {
    name: MAIN_FILE,
    language: 'python',
    value: [
      'from uagents import Context',
      '',
      '',
      '@agent.on_interval(period=10.0)',
      'async def hello(ctx: Context):',
      '    ctx.logger.info(f"Hello from {agent.name}")',
      '',
    ].join('\n'),
  },
];

/** A file's language from its name, as the hosting API's files carry it. */
function languageOf(name: string): string {
  if (name.endsWith('.py')) return 'python';
  if (name.endsWith('.md')) return 'markdown';
  if (name.endsWith('.json')) return 'json';
  return 'plaintext';
}

/** Why a file name is refused, or undefined when it is fine among `others`. */
function badFileName(name: string, others: CodeFile[]): string | undefined {
  // As the server checks them: relative, no hidden files, no "..".
  if (name.length > 255 || !name.split('/').every((part) => /^[A-Za-z0-9_][\w.-]*$/.test(part))) {
    return 'A file name is words of letters, digits, "_", "-" and "." (not first), separated by "/" for folders';
  }
  if (others.some((f) => f.name === name)) return `There is a file ${name} already`;
  return undefined;
}

/** The files of a saved code string; a string that is not a list of files is refused. */
function parseFiles(code: string): CodeFile[] {
  const parsed: unknown = JSON.parse(code);
  if (!Array.isArray(parsed)) throw new Error('The saved code is not a list of files');
  return parsed.map((item: Partial<CodeFile>) => ({
    name: String(item.name),
    value: String(item.value ?? ''),
    language: item.language ?? languageOf(String(item.name)),
  }));
}

/**
 * The agent's code: its files in tabs, one editor, add, rename and delete a file, and save
 * (which answers the new digest). `onSaved` hears each save; `saveUnsaved` is set, while the
 * editor holds changes not saved, to what saves them (so that Start saves them first).
 */
export function HostedCode(props: {
  path: string;
  onSaved: () => void;
  saveUnsaved?: { current: (() => Promise<void>) | undefined };
}) {
  const { path } = props;
  const loaded = useLoad(() => api<SavedCode>('GET', `${path}/code`), [path]);
  const [files, setFiles] = useState<CodeFile[] | undefined>();
  /** The code as last saved (or loaded), to tell unsaved changes. */
  const [saved, setSaved] = useState<string | undefined>();
  const [active, setActive] = useState(MAIN_FILE);
  const [digest, setDigest] = useState<string | undefined>();
  const [newName, setNewName] = useState('');
  const [rename, setRename] = useState('');
  const [problem, setProblem] = useState<string | undefined>();
  const save = useAction();

  useEffect(() => {
    const code = loaded.value;
    if (!code || files) return;
    try {
      const initial = code.code ? parseFiles(code.code) : STARTER;
      setFiles(initial);
      // Compared as the page writes the files, whatever order of fields the saved text has.
      setSaved(code.code ? JSON.stringify(initial) : undefined);
      setDigest(code.digest ?? undefined);
      setActive(initial.some((f) => f.name === MAIN_FILE) ? MAIN_FILE : (initial[0]?.name ?? ''));
    } catch (err) {
      setProblem(messageOf(err));
    }
  }, [loaded.value]);

  const unsaved = files !== undefined && JSON.stringify(files) !== saved;
  // Leaving the console (closing the tab, reloading) with unsaved code asks first.
  useEffect(() => {
    if (!unsaved) return;
    const ask = (event: BeforeUnloadEvent) => event.preventDefault();
    addEventListener('beforeunload', ask);
    return () => removeEventListener('beforeunload', ask);
  }, [unsaved]);

  if (loaded.error) {
    return (
      <Section>
        <p class="error">{loaded.error}</p>
      </Section>
    );
  }
  if (!files) {
    return <Section>{problem ? <p class="error">{problem}</p> : <p>Loading the code…</p>}</Section>;
  }

  const current = files.find((f) => f.name === active) ?? files[0];
  const code = JSON.stringify(files);

  const edit = (name: string, value: string) =>
    setFiles((list) => list?.map((f) => (f.name === name ? { ...f, value } : f)));
  const addFile = (event: Event) => {
    event.preventDefault();
    const name = newName.trim();
    const refused = badFileName(name, files);
    setProblem(refused);
    if (refused) return;
    setFiles([...files, { name, value: '', language: languageOf(name) }]);
    setActive(name);
    setNewName('');
  };
  const renameFile = (event: Event) => {
    event.preventDefault();
    if (!current) return;
    const name = rename.trim();
    const refused = badFileName(name, files);
    setProblem(refused);
    if (refused) return;
    setFiles(files.map((f) => (f === current ? { ...f, name, language: languageOf(name) } : f)));
    setActive(name);
    setRename('');
  };
  const deleteFile = () => {
    if (!current) return;
    const rest = files.filter((f) => f !== current);
    setFiles(rest);
    setActive(MAIN_FILE);
    setProblem(undefined);
  };
  const saveNow = async () => {
    if (!files.some((f) => f.name === MAIN_FILE)) {
      throw new Error(`The code needs a file ${MAIN_FILE}: the agent starts from it`);
    }
    const answer = await api<{ digest: string }>('PUT', `${path}/code`, { code });
    setSaved(code);
    setDigest(answer.digest);
    props.onSaved();
  };
  const submit = save.submit(saveNow);
  if (props.saveUnsaved) props.saveUnsaved.current = unsaved ? saveNow : undefined;

  return (
    <Section>
      <div class="tabs" role="group" aria-label="Files">
        {files.map((f) => (
          <button
            key={f.name}
            type="button"
            class="tab"
            aria-pressed={f === current}
            onClick={() => setActive(f.name)}
          >
            {f.name}
          </button>
        ))}
      </div>
      {current && <CodeEditor file={current} onChange={edit} />}
      <form class="filters" onSubmit={submit}>
        <button type="submit" disabled={save.busy}>
          Save code
        </button>
        <span class="status" data-testid="code-state">
          {unsaved ? 'Unsaved changes' : saved ? 'Saved' : 'Not saved yet'}
        </span>
        {digest && (
          <span>
            digest <code data-testid="code-digest">{digest}</code>
          </span>
        )}
      </form>
      {save.error && <p class="error">{save.error}</p>}
      <div class="filters">
        <form class="filters" onSubmit={addFile}>
          <input
            name="new-file"
            placeholder="helpers.py"
            aria-label="New file name"
            required
            value={newName}
            onInput={(e) => setNewName((e.target as HTMLInputElement).value)}
          />
          <button type="submit" class="secondary">
            Add file
          </button>
        </form>
        {current && current.name !== MAIN_FILE && (
          <>
            <form class="filters" onSubmit={renameFile}>
              <input
                name="rename-file"
                placeholder={current.name}
                aria-label={`Rename ${current.name} to`}
                required
                value={rename}
                onInput={(e) => setRename((e.target as HTMLInputElement).value)}
              />
              <button type="submit" class="secondary">
                Rename
              </button>
            </form>
            <button type="button" class="secondary" onClick={deleteFile}>
              Delete {current.name}
            </button>
          </>
        )}
      </div>
      {problem && <p class="error">{problem}</p>}
    </Section>
  );
}

function Section(props: { children: ComponentChildren }) {
  return (
    <section class="card">
      <h3>Code</h3>
      <p>
        <code>{MAIN_FILE}</code> runs with <code>agent</code> already made for it (its key is kept
        by Agentry); the other files can be imported from it. A running agent restarts with the code
        saved.
      </p>
      {props.children}
    </section>
  );
}

/**
 * The editor of one file at a time. The editor's code is fetched when the first one is shown,
 * so that only this page pays for it.
 */
function CodeEditor(props: { file: CodeFile; onChange: (file: string, text: string) => void }) {
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<FileEditor | undefined>();
  const onChange = useRef(props.onChange);
  onChange.current = props.onChange;
  const [failed, setFailed] = useState<string | undefined>();
  const [ready, setReady] = useState(false);
  useEffect(() => {
    let live = true;
    import('../editor').then(
      ({ FileEditor }) => {
        if (!live || !host.current) return;
        editor.current = new FileEditor(host.current, (file, text) => onChange.current(file, text));
        setReady(true);
      },
      (err: unknown) => live && setFailed(`The editor could not be loaded: ${messageOf(err)}`),
    );
    return () => {
      live = false;
      editor.current?.destroy();
      editor.current = undefined;
    };
  }, []);
  const { name, value, language } = props.file;
  useEffect(() => {
    editor.current?.show(name, value, language);
  }, [ready, name, value, language]);
  return (
    <>
      {failed && <p class="error">{failed}</p>}
      {!ready && !failed && <p>Loading the editor…</p>}
      <div class="editor" ref={host} data-testid="editor" />
    </>
  );
}
