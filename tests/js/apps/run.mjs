// Plays the host's side of the MCP Apps bridge in Debian's headless Chromium (one browser for all cases).
// Usage: node run.mjs CASES.json ARTIFACTS_DIR  ->  one JSON line per case on stdout.
// A case is {name, app, result} (the ui:// resource's HTML in a sandboxed iframe, sent `result` as the
// host's ui/notifications/tool-result) or {name, file} (a standalone page opened as it is).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [casesFile, artifacts] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesFile, "utf8"));
const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

const HARNESS = `<!DOCTYPE html><html><body style="margin:0">
<iframe id="app" sandbox="allow-scripts" style="width:1100px;height:300px;border:0;display:block"></iframe>
<script>
window.sent = [];
window.start = function (html, result) {
  var frame = document.getElementById("app");
  window.addEventListener("message", function (e) {
    if (e.source !== frame.contentWindow) return;
    var m = e.data, w = frame.contentWindow;
    window.sent.push(m.method || ("response " + m.id));
    if (m.method === "ui/initialize") {
      w.postMessage({jsonrpc: "2.0", id: m.id, result: {protocolVersion: "2026-01-26",
        hostInfo: {name: "mesh-mcp test harness", version: "1"}, hostCapabilities: {}, hostContext: {theme: "light"}}}, "*");
    } else if (m.method === "ui/notifications/size-changed") {
      frame.style.height = Math.min(m.params.height, 2000) + "px";
      window.sized = (window.sized || 0) + 1;
    } else if (m.method === "ui/notifications/initialized") {
      w.postMessage({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: {}}}, "*");
      w.postMessage({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: result}, "*");
    }
  });
  frame.srcdoc = html;
};
</script></body></html>`;

async function inspect(frame) {
  return frame.$$eval("g.node", (gs) => gs.map((g) => ({
    id: g.getAttribute("data-node"), state: g.getAttribute("data-state"), broken: g.getAttribute("data-broken") === "1",
    label: g.querySelector("text").textContent })));
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: FLAGS });
try {
  for (const c of cases) {
    const page = await browser.newPage({ viewport: { width: 1100, height: 120 } });
    const requests = [], problems = [];
    const own = c.file ? "file://" + c.file : null;
    page.on("request", (r) => { if (!/^(about|data):/.test(r.url()) && r.url() !== own) requests.push(r.url()); });
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    page.on("pageerror", (e) => problems.push(String(e)));
    let frame;
    if (c.file) {
      await page.goto("file://" + c.file);
      frame = page.mainFrame();
    } else {
      await page.setContent(HARNESS);
      await page.evaluate(([h, r]) => window.start(h, r), [c.app, c.result]);
      await page.waitForFunction(() => document.getElementById("app").contentWindow.length >= 0);
      frame = await (await page.$("#app")).contentFrame();
    }
    await frame.waitForSelector("svg[data-drawn]", { timeout: 10000 });
    if (!c.file) await page.waitForFunction(() => window.sized > 0, null, { timeout: 10000 });
    const out = { name: c.name, nodes: await inspect(frame), edges: await frame.$$eval("path.edge", (p) => p.length),
      title: await frame.textContent("#title"), verdict: await frame.textContent("#verdict") };
    const sized = async (n) => { if (!c.file) await page.waitForFunction((k) => window.sized > k, n); };
    const shot = async (suffix) => {
      // the viewport grown to the page (a full-page capture can leave an out-of-process frame half painted)
      await frame.evaluate(() => window.scrollTo(0, 0));
      const height = await page.evaluate(() => document.documentElement.scrollHeight);
      await page.setViewportSize({ width: 1100, height: Math.min(height, 2000) });
      await page.waitForTimeout(100);
      await page.screenshot({ path: join(artifacts, c.name + suffix + ".png") });
    };
    await shot("");
    const broken = out.nodes.find((n) => n.broken) || out.nodes[0];
    let count = c.file ? 0 : await page.evaluate(() => window.sized);
    await frame.click(`g.node[data-node="${broken.id}"]`);
    await sized(count);
    out.clicked = broken.id;
    out.panel = await frame.textContent("#panel");
    await shot("-clicked");
    const folded = out.nodes.find((n) => n.label.startsWith("+"));
    if (folded) {
      count = c.file ? 0 : await page.evaluate(() => window.sized);
      await frame.click(`g.node[data-node="${folded.id}"]`);
      await sized(count);
      out.expanded = await inspect(frame);
      await shot("-expanded");
    }
    out.sent = c.file ? [] : await page.evaluate(() => window.sent);
    out.markup = await frame.$$eval("img, iframe, script[src], a[href]", (e) => e.length);
    out.requests = requests;
    out.problems = problems;
    process.stdout.write(JSON.stringify(out) + "\n");
    await page.close();
  }
} finally {
  await browser.close();
}
