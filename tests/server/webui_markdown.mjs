// The chat page's Markdown renderer (webui/markdown.js) on its own, under Node: what it renders,
// and that no model output becomes markup (tags, attributes, script URLs). Env: BRISK_WEBUI
// (the webui/ folder). Exits non-zero on the first failed check.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// The page loads it as a module; Node needs the .mjs name to do the same.
const dir = mkdtempSync(join(tmpdir(), "brisk-md-"));
copyFileSync(join(process.env.BRISK_WEBUI, "markdown.js"), join(dir, "markdown.mjs"));
const { renderMarkdown, escapeHtml } = await import(pathToFileURL(join(dir, "markdown.mjs")));

assert.equal(escapeHtml(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
assert.equal(renderMarkdown("# Title"), "<h1>Title</h1>");
assert.equal(renderMarkdown("some **bold** and *it* and `x<y`"), "<p>some <strong>bold</strong> and <em>it</em> and <code>x&lt;y</code></p>");
assert.equal(renderMarkdown("- a\n- b\n\n1. c"), "<ul><li>a</li><li>b</li></ul>\n<ol><li>c</li></ol>");
assert.equal(renderMarkdown("```js\nif (a < b) {}\n```"), '<pre><code class="language-js">if (a &lt; b) {}</code></pre>');
assert.equal(renderMarkdown("> quoted"), "<blockquote>quoted</blockquote>");
assert.equal(renderMarkdown("[site](https://example.com/a?b=1&c=2)"),
  '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">site</a></p>');
assert.equal(renderMarkdown("line one\nline two"), "<p>line one<br>line two</p>");
// An unclosed fence (a stream cut mid-block) still renders as code.
assert.equal(renderMarkdown("```\n<b>"), "<pre><code>&lt;b&gt;</code></pre>");

// Hostile output: whatever comes back, no tag but the renderer's own, no event attribute, no
// script URL, no attribute broken out of.
const allowed = new Set(["p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "code", "blockquote", "strong", "em", "a"]);
const attacks = [
  `<script>alert(1)</script>`,
  `<img src=x onerror=alert(1)>`,
  `[x](javascript:alert(1))`,
  `[x](JaVaScRiPt:alert(1))`,
  `[x](data:text/html,<script>alert(1)</script>)`,
  `[x](https://a.com/" onmouseover="alert(1))`,
  `[x](https://a.com/'onmouseover='alert(1))`,
  "```\"><script>alert(1)</script>\n<svg onload=alert(1)>\n```",
  "```js\" onmouseover=\"alert(1)\nx\n```",
  "**<iframe src=//evil>**",
  "`<img src=x onerror=alert(1)>`",
  "# <style>body{display:none}</style>",
  "- <a href=javascript:alert(1)>x</a>",
  "> <object data=x>",
  "\u0000 0\u0000 <b>",
  "[<img src=x onerror=alert(1)>](https://ok.com)",
  "&lt;script&gt; &#60;script&#62;",
];
for (const a of attacks) {
  const html = renderMarkdown(a);
  for (const m of html.matchAll(/<\/?([a-zA-Z0-9]+)([^>]*)>/g)) {
    assert.ok(allowed.has(m[1].toLowerCase()), `tag <${m[1]}> from ${JSON.stringify(a)}: ${html}`);
    const attrs = m[2];
    const names = [...attrs.matchAll(/\s([a-zA-Z-]+)=/g)].map((x) => x[1].toLowerCase());
    for (const n of names) assert.ok(["href", "target", "rel", "class"].includes(n), `attribute ${n} from ${JSON.stringify(a)}: ${html}`);
    const href = attrs.match(/href="([^"]*)"/);
    if (href) assert.match(href[1], /^(https?:|mailto:)/i, `href from ${JSON.stringify(a)}: ${html}`);
  }
}
console.log(`webui_markdown: ok (${attacks.length} hostile inputs)`);
