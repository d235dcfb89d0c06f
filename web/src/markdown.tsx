import { Lexer, type Token, type Tokens } from 'marked';
import type { ComponentChildren } from 'preact';

/**
 * Markdown written by agents, shown without ever becoming HTML: marked only tokenises it, and
 * the tokens become Preact elements, whose text is escaped. Raw HTML in the source is shown as
 * text, images as their alt text, and links only when they are absolute http(s) URLs (opened
 * without referrer or opener); any other link is its text alone.
 */
export function Markdown(props: { source: string }) {
  let tokens: Token[];
  try {
    tokens = new Lexer({ gfm: true }).lex(props.source);
  } catch {
    return <pre>{props.source}</pre>;
  }
  return <div class="markdown">{blocks(tokens)}</div>;
}

function safeHref(href: string): string | undefined {
  const trimmed = href.trim();
  if (!/^https?:\/\//i.test(trimmed)) return undefined;
  try {
    return new URL(trimmed).href;
  } catch {
    return undefined;
  }
}

function blocks(tokens: Token[]): ComponentChildren[] {
  return tokens.map((token, i) => block(token, i));
}

function block(token: Token, key: number): ComponentChildren {
  switch (token.type) {
    case 'space':
      return null;
    case 'heading': {
      const t = token as Tokens.Heading;
      const children = inline(t.tokens);
      // The page has its own h1 and h2: the readme's headings sit below them.
      switch (Math.min(t.depth + 2, 6)) {
        case 3:
          return <h3 key={key}>{children}</h3>;
        case 4:
          return <h4 key={key}>{children}</h4>;
        case 5:
          return <h5 key={key}>{children}</h5>;
        default:
          return <h6 key={key}>{children}</h6>;
      }
    }
    case 'paragraph':
      return <p key={key}>{inline((token as Tokens.Paragraph).tokens)}</p>;
    case 'text': {
      const t = token as Tokens.Text;
      return <p key={key}>{t.tokens ? inline(t.tokens) : t.text}</p>;
    }
    case 'code':
      return (
        <pre key={key}>
          <code>{(token as Tokens.Code).text}</code>
        </pre>
      );
    case 'blockquote':
      return <blockquote key={key}>{blocks((token as Tokens.Blockquote).tokens)}</blockquote>;
    case 'list': {
      const t = token as Tokens.List;
      const items = t.items.map((item, j) => (
        <li key={j}>{item.tokens.map((inner, k) => listItemPart(inner, k))}</li>
      ));
      return t.ordered ? <ol key={key}>{items}</ol> : <ul key={key}>{items}</ul>;
    }
    case 'hr':
      return <hr key={key} />;
    case 'table': {
      const t = token as Tokens.Table;
      return (
        <table key={key}>
          <thead>
            <tr>
              {t.header.map((cell, j) => (
                <th key={j}>{inline(cell.tokens)}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {t.rows.map((row, j) => (
              <tr key={j}>
                {row.map((cell, k) => (
                  <td key={k}>{inline(cell.tokens)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      );
    }
    default:
      // Raw HTML and anything unknown: the source text, shown as text.
      return <pre key={key}>{token.raw}</pre>;
  }
}

/** A tight list item holds bare text tokens; show those inline rather than as paragraphs. */
function listItemPart(token: Token, key: number): ComponentChildren {
  if (token.type === 'text') {
    const t = token as Tokens.Text;
    return <span key={key}>{t.tokens ? inline(t.tokens) : t.text}</span>;
  }
  return block(token, key);
}

function inline(tokens: Token[] | undefined): ComponentChildren[] {
  return (tokens ?? []).map((token, i) => inlineToken(token, i));
}

function inlineToken(token: Token, key: number): ComponentChildren {
  switch (token.type) {
    case 'text': {
      const t = token as Tokens.Text;
      return t.tokens ? <span key={key}>{inline(t.tokens)}</span> : t.text;
    }
    case 'escape':
      return (token as Tokens.Escape).text;
    case 'strong':
      return <strong key={key}>{inline((token as Tokens.Strong).tokens)}</strong>;
    case 'em':
      return <em key={key}>{inline((token as Tokens.Em).tokens)}</em>;
    case 'del':
      return <del key={key}>{inline((token as Tokens.Del).tokens)}</del>;
    case 'codespan':
      return <code key={key}>{(token as Tokens.Codespan).text}</code>;
    case 'br':
      return <br key={key} />;
    case 'link': {
      const t = token as Tokens.Link;
      const href = safeHref(t.href);
      const children = inline(t.tokens);
      return href ? (
        <a key={key} href={href} rel="noopener noreferrer nofollow" target="_blank">
          {children}
        </a>
      ) : (
        <span key={key}>{children}</span>
      );
    }
    case 'image':
      return (token as Tokens.Image).text;
    default:
      // Inline HTML and anything unknown: its source, as text.
      return token.raw;
  }
}
