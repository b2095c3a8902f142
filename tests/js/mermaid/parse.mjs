// Parse Mermaid diagrams with the real Mermaid parser under Node (jsdom provides window/document).
// stdin: a JSON array of diagram texts.
// stdout: a JSON array, in the same order, of
//   {ok, type, error, vertices: [{id, text, shape, classes, link}], edges: [{start, end, text, stroke}]}
// (vertices and edges only for flowcharts; entity codes in texts are given back as "#name;").
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!DOCTYPE html><html><body></body></html>", { pretendToBeVisual: true });
globalThis.window = dom.window;
globalThis.document = dom.window.document;

const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });

const entities = (text) => String(text ?? "").replace(/ﬂ°°(\d+)¶ß/g, "#$1;").replace(/ﬂ°(\w+)¶ß/g, "#$1;");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const text of JSON.parse(input)) {
  try {
    const parsed = await mermaid.parse(text);
    const result = { ok: true, type: parsed && parsed.diagramType, error: null, vertices: [], edges: [] };
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    const db = diagram.db;
    if (typeof db.getVertices === "function") {
      for (const [id, v] of db.getVertices()) {
        result.vertices.push({ id, text: entities(v.text), shape: v.type ?? null, classes: v.classes ?? [],
                               link: v.link ?? null });
      }
      for (const e of db.getEdges()) {
        result.edges.push({ start: e.start, end: e.end, text: entities(e.text), stroke: e.stroke ?? null });
      }
    }
    results.push(result);
  } catch (err) {
    results.push({ ok: false, type: null, error: String((err && err.message) || err), vertices: [], edges: [] });
  }
}
process.stdout.write(JSON.stringify(results));
