// The hosted agents' code editor: CodeMirror, with Python highlighting. Only the hosted agent
// page imports this module, and only dynamically, so the editor is a chunk of its own that no
// other page loads.

import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { python } from '@codemirror/lang-python';
import {
  bracketMatching,
  defaultHighlightStyle,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from '@codemirror/language';
import { EditorState, type Extension } from '@codemirror/state';
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
} from '@codemirror/view';

/**
 * One editor showing one file at a time. Each file keeps its own editor state (text, cursor,
 * undo history) while another is shown, so switching tabs loses nothing.
 */
export class FileEditor {
  private readonly view: EditorView;
  private readonly states = new Map<string, EditorState>();
  private shown: string | undefined;

  /** `onChange` hears every edit of the file shown, with its whole new text. */
  constructor(
    parent: HTMLElement,
    private readonly onChange: (file: string, text: string) => void,
  ) {
    // In a shadow root CodeMirror's styles go into a constructed style sheet, which the pages'
    // Content-Security-Policy allows as it allows any change made through the CSS object
    // model; in the document itself they would be a <style> element, which it refuses.
    const root = parent.shadowRoot ?? parent.attachShadow({ mode: 'open' });
    this.view = new EditorView({
      root,
      parent: root,
      dispatchTransactions: (transactions, view) => {
        view.update(transactions);
        if (this.shown !== undefined && transactions.some((tr) => tr.docChanged)) {
          this.onChange(this.shown, view.state.doc.toString());
        }
      },
    });
  }

  /**
   * Shows `file` with `text` in `language`; nothing changes when it is shown already (the
   * editor has its newest text; `text` may lag behind it by a keystroke). A file's earlier
   * state is kept when its text is still the same (coming back to a tab); otherwise, as for a
   * file seen for the first time or renamed, it starts afresh.
   */
  show(file: string, text: string, language: string): void {
    if (this.shown === file) return;
    if (this.shown !== undefined) this.states.set(this.shown, this.view.state);
    let state = this.states.get(file);
    if (!state || state.doc.toString() !== text) {
      state = EditorState.create({ doc: text, extensions: extensionsFor(file, language) });
    }
    this.shown = file;
    this.view.setState(state);
  }

  destroy(): void {
    this.view.destroy();
  }
}

/** The editor's look; inside its shadow root the page's style sheet does not reach it. */
const look = EditorView.theme({
  '&': { height: '22rem', fontSize: '0.9rem', border: '1px solid #dde2ea', borderTop: 'none' },
  '&.cm-focused': { outline: '2px solid #2456d3' },
  '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, monospace' },
});

function extensionsFor(file: string, language: string): Extension[] {
  const label = `Code of ${file}`;
  return [
    lineNumbers(),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    drawSelection(),
    indentOnInput(),
    bracketMatching(),
    highlightActiveLine(),
    syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
    indentUnit.of('    '),
    keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
    look,
    EditorView.contentAttributes.of({ 'aria-label': label }),
    language === 'python' ? python() : [],
  ];
}
