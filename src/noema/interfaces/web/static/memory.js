// The memory inspector: a citation link opens its turn, with its neighbours, in place.
"use strict";

const memory = {
  async open(link) {
    const next = link.closest("p, li, div").nextElementSibling;
    if (next && next.classList.contains("cited") && next.dataset.turn === link.dataset.turn) {
      next.remove();  // a second click folds it again
      return;
    }
    const {status, body} = await noema.get(`/api/turn/${link.dataset.turn}`);
    const box = noema.el("div", "cited");
    box.dataset.turn = link.dataset.turn;
    if (status !== 200) {
      box.appendChild(noema.el("p", "error", body.error || "that turn could not be read"));
    } else {
      memory.fill(box, body.turns, body.id);
    }
    link.closest("p, li, div").after(box);
  },

  // The cited turn first and whole; the turns around it folded, in their order.
  fill(box, turns, focus) {
    const cited = turns.find((turn) => turn.id === focus);
    if (cited) box.appendChild(memory.turnNode(cited, focus));
    const around = turns.filter((turn) => turn.id !== focus);
    if (!around.length) return;
    const ids = around.map((turn) => turn.id);
    const fold = noema.el("details", "neighbours");
    fold.appendChild(noema.el("summary", "",
      `The ${around.length} turn${around.length === 1 ? "" : "s"} around it ` +
      (ids.length === 1 ? `(#${ids[0]})` : `(#${ids[0]}–#${ids[ids.length - 1]})`)));
    for (const turn of turns) {
      if (turn.id === focus) fold.appendChild(noema.el("p", "muted here", `#${focus} is here.`));
      else fold.appendChild(memory.turnNode(turn, focus));
    }
    box.appendChild(fold);
  },

  turnNode(turn, focus) {
    const node = noema.el("div", `turn ${turn.kind}${turn.id === focus ? " focus" : ""}`);
    node.dataset.turn = turn.id;
    node.appendChild(noema.el("p", "muted", `#${turn.id} · ${turn.who || turn.kind} · ${noema.when(turn.ts)}`));
    const body = noema.el("div", "body");
    if (turn.kind === "assistant" && typeof turn.html === "string") {
      body.innerHTML = turn.html;  // rendered and sanitised by the server
    } else {
      body.classList.add("plain");  // its line breaks kept
      body.textContent = turn.kind === "tool_call" ? (turn.arguments || "") : turn.content;
    }
    node.appendChild(body);
    return node;
  },
};

document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll('.journey a[href^="/memory/turn/"]')) {
    link.dataset.turn = link.getAttribute("href").split("/").pop();
    link.classList.add("cite");
    link.setAttribute("aria-expanded", "false");
    link.addEventListener("click", (event) => {
      event.preventDefault();
      memory.open(link).then(() => {
        const open = link.closest("p, li, div").nextElementSibling;
        link.setAttribute("aria-expanded", open && open.classList.contains("cited") ? "true" : "false");
      });
    });
  }
});
