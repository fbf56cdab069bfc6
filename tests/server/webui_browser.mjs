// The chat page in a real browser: the system Chromium (BRISK_CHROMIUM) driven by
// puppeteer-core against `brisk serve` (BRISK_BASE, API key BRISK_KEY, two models BRISK_MODELS
// "a,b"). Opens the page, gives the API key when asked, sends a message and sees the answer
// appear while it streams, stops a long answer (the server cancels it), switches model, renders
// hostile stored output inertly, keeps conversations over a reload; BRISK_SCREENSHOT: where
// to save a screenshot. Exits non-zero on the first failed check.
import puppeteer from "puppeteer-core";
import assert from "node:assert/strict";

const base = process.env.BRISK_BASE;
const key = process.env.BRISK_KEY;
const [modelA, modelB] = process.env.BRISK_MODELS.split(",");

const browser = await puppeteer.launch({
  executablePath: process.env.BRISK_CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--disable-background-networking"],
});
const metric = async (name) => {
  const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  const line = (await r.text()).split("\n").find((l) => l.startsWith(name));
  return line ? Number(line.split(" ").pop()) : NaN;
};
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 680 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  // Any request that leaves this server fails the test (no CDN, no network).
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(base) && !r.url().startsWith("data:")) foreign.push(r.url()); });

  await page.goto(`${base}/`, { waitUntil: "load" });
  // The model list needs the key: the page asks for it.
  await page.waitForSelector("#key-dialog[open]", { timeout: 10000 });
  await page.type("#key-dialog-input", key);
  await page.click("#key-form button");
  await page.waitForFunction((n) => document.querySelectorAll("#model option").length === n, { timeout: 10000 }, 2);
  const options = await page.$$eval("#model option", (os) => os.map((o) => o.value));
  assert.deepEqual(options, [modelA, modelB]);

  // A message: the answer grows on the page while it streams (every length seen is kept).
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const m = document.querySelector(".msg.assistant:last-child");
      if (m) window.__lengths.push([m.querySelector(".body").textContent.length, !!m.querySelector(".stats")]);
    }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
  });
  await page.$eval("#max_tokens", (e) => { e.value = "400"; e.dispatchEvent(new Event("change")); });
  await page.$eval("#temperature", (e) => { e.value = "0"; e.dispatchEvent(new Event("change")); });
  await page.click("#new-chat");
  await page.type("#input", "Hello, who are you?");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector(".msg.assistant:last-child .stats")?.textContent.includes("tokens"), { timeout: 30000 });
  const lengths = await page.evaluate(() => window.__lengths);
  // Text was on the page before the answer ended (no stats yet), and grew after.
  const partial = lengths.filter(([n, done]) => n > 0 && !done).map(([n]) => n);
  const final = lengths.at(-1)[0];
  assert.ok(partial.length > 0 && Math.min(...partial) < final, `streamed: ${JSON.stringify(lengths)}`);
  const stats = await page.$eval(".msg.assistant:last-child .stats", (e) => e.textContent);
  assert.match(stats, /\d+ tokens · [\d.]+ tok\/s · prompt \d+ · /, stats);
  assert.ok(stats.includes(modelA), stats);

  // Stop: a long answer (greedy, thousands of tokens) is aborted while it streams; the page
  // says so and the server cancels the generation. The stop button is pressed from inside the
  // page as soon as the first text shows (a click from here would come too late: the tiny
  // model writes thousands of tokens a second). When the whole answer was written before the
  // abort reached the server (it counts a "length" end instead), the stop is tried again.
  await page.$eval("#max_tokens", (e) => { e.value = "3800"; e.dispatchEvent(new Event("change")); });
  const ends = async () => ({ cancelled: await metric('brisk_generations_total{reason="cancelled"}'),
                              length: await metric('brisk_generations_total{reason="length"}') });
  let stopped = false;
  for (let attempt = 0; attempt < 4 && !stopped; attempt++) {
    const before = await ends();
    await page.click("#new-chat");
    await page.evaluate(() => {
      const observer = new MutationObserver(() => {
        const body = document.querySelector(".msg.assistant:last-child .body");
        const stop = document.getElementById("stop");
        if (body && body.textContent.length > 0 && !stop.hidden) {
          observer.disconnect();
          stop.click();
        }
      });
      observer.observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
    });
    await page.type("#input", "Tell me a very long story.");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector(".msg.assistant:last-child .stats")?.textContent.includes("stopped"), { timeout: 10000 });
    assert.equal(await page.$eval("#send", (e) => e.hidden), false, "send button back");
    let now = before;
    for (let i = 0; i < 50 && now.cancelled === before.cancelled && now.length === before.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      now = await ends();
    }
    assert.ok(now.cancelled > before.cancelled || now.length > before.length, `the generation ended: ${JSON.stringify([before, now])}`);
    stopped = now.cancelled > before.cancelled;
  }
  assert.ok(stopped, "the server cancelled a stopped generation");

  // Switch model: the next answer comes from the other one.
  await page.select("#model", modelB);
  await page.$eval("#max_tokens", (e) => { e.value = "8"; e.dispatchEvent(new Event("change")); });
  await page.type("#input", "And you?");
  await page.keyboard.press("Enter");
  await page.waitForFunction((m) => document.querySelector(".msg.assistant:last-child .stats")?.textContent.includes(m),
    { timeout: 30000 }, modelB);

  // Conversations persist in localStorage across a reload; hostile stored output stays text.
  await page.evaluate(() => {
    const convs = JSON.parse(localStorage.getItem("brisk.conversations"));
    convs.unshift({ id: "xss", title: "<img src=x onerror=window.__xss=1>", messages: [
      { role: "user", content: "<img src=x onerror=window.__xss=1>" },
      { role: "assistant", content: "<script>window.__xss=1</script>\n[x](javascript:window.__xss=1)\n```\n</code><img src=x onerror=window.__xss=1>\n```",
        reasoning: "<img src=x onerror=window.__xss=1>" }] });
    localStorage.setItem("brisk.conversations", JSON.stringify(convs));
    localStorage.setItem("brisk.current", JSON.stringify("xss"));
  });
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector(".msg.assistant");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no script ran");
  assert.equal(await page.$$eval("#messages img, #messages script, #conversations img", (es) => es.length), 0, "no element from output");
  assert.equal(await page.$$eval("#messages a[href^='javascript']", (es) => es.length), 0, "no script link");
  assert.equal(await page.$eval("details.reasoning", (d) => d.open), false, "reasoning collapsed");
  const titles = await page.$$eval("#conversations li span", (es) => es.map((e) => e.textContent));
  assert.ok(titles.length >= 2 && titles.includes("Hello, who are you?"), `conversations kept: ${titles}`);

  // The screenshot for the docs: the first conversation.
  if (process.env.BRISK_SCREENSHOT) {
    await page.evaluate(() => {
      const convs = JSON.parse(localStorage.getItem("brisk.conversations")).filter((c) => c.id !== "xss");
      localStorage.setItem("brisk.conversations", JSON.stringify(convs));
      localStorage.setItem("brisk.current", JSON.stringify(convs[convs.length - 1].id));
    });
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector(".msg.assistant .stats");
    await page.$eval("#settings", (d) => { d.open = true; });
    await page.screenshot({ path: process.env.BRISK_SCREENSHOT });
  }
  assert.deepEqual(foreign, [], "requests beyond the server");
  assert.deepEqual(pageErrors, [], "page errors");
  console.log("webui_browser: ok");
} finally {
  await browser.close();
}
