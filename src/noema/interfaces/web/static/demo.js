// The first-run page's demo: `noema demo` run by the server, its transcript
// followed live (server-sent events resumed by their id), chapter by chapter.
"use strict";

const demo = {
  source: null,
  chapter: null,   // the <pre> of the chapter being written
  pending: "",     // the end of the transcript after its last newline

  start() {
    document.getElementById("demo-start").addEventListener("click", demo.run);
    document.getElementById("demo-stop").addEventListener("click", demo.stop);
  },

  async run() {
    const start = document.getElementById("demo-start");
    start.disabled = true;
    const {status, body} = await noema.post("/api/demo/start", {});
    if (status !== 200) {
      demo.state(body.error || "the demo could not be started");
      start.disabled = false;
      return;
    }
    document.getElementById("demo-output").replaceChildren();
    demo.chapter = null;
    demo.pending = "";
    document.getElementById("demo-stop").hidden = false;
    demo.state("The demo is running…");
    demo.follow();
  },

  follow() {
    if (demo.source) demo.source.close();
    const source = new EventSource("/api/demo/live");
    demo.source = source;
    source.onmessage = (event) => {
      const piece = JSON.parse(event.data);
      if (piece.end) {
        source.close();
        demo.finished(piece.code);
      } else {
        demo.write(piece.text);
      }
    };
  },

  // Text arrives in pieces cut anywhere; whole lines are placed, a
  // "=== heading ===" line opens a chapter, the unfinished line shows as it grows.
  write(text) {
    const lines = (demo.pending + text).split("\n");
    demo.pending = lines.pop();
    for (const line of lines) demo.line(line);
    demo.current().querySelector(".pending").textContent = demo.pending;
    window.scrollTo(0, document.body.scrollHeight);
  },

  line(line) {
    const heading = /^=== (.*) ===$/.exec(line);
    if (heading) {
      const section = noema.el("section", "demo-chapter");
      section.appendChild(noema.el("h2", "", heading[1]));
      const pre = noema.el("pre", "");
      pre.append(document.createTextNode(""), noema.el("span", "pending"));
      section.appendChild(pre);
      document.getElementById("demo-output").appendChild(section);
      demo.chapter = pre;
      return;
    }
    demo.current().firstChild.appendData(line + "\n");
  },

  current() {
    if (!demo.chapter) {  // the lines before the first chapter
      const pre = noema.el("pre", "");
      pre.append(document.createTextNode(""), noema.el("span", "pending"));
      document.getElementById("demo-output").appendChild(pre);
      demo.chapter = pre;
    }
    return demo.chapter;
  },

  finished(code) {
    if (demo.pending) demo.line(demo.pending);
    demo.pending = "";
    demo.current().querySelector(".pending").textContent = "";
    demo.state(code === 0 ? "The demo finished." : `The demo ended early (status ${code}).`);
    document.getElementById("demo-stop").hidden = true;
    document.getElementById("demo-start").disabled = false;
  },

  async stop() {
    const {status, body} = await noema.post("/api/demo/stop", {});
    if (status !== 200) demo.state(body.error || "the demo could not be stopped");
  },

  state(text) {
    document.getElementById("demo-state").textContent = text;
  },
};

document.addEventListener("DOMContentLoaded", demo.start);
