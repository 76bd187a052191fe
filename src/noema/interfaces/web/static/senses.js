// The senses page: silence and start a channel; times shown in the person's zone.
"use strict";

const senses = {
  async act(url, data, button) {
    button.disabled = true;
    const {status, body} = await noema.post(url, data);
    button.disabled = false;
    const box = document.getElementById("outcome");
    box.hidden = false;
    box.className = status === 200 ? "card" : "card error";
    box.textContent = status === 200 ? body.text : (body.error || "that did not work");
    if (status === 200) {
      const row = button.closest("tr");
      row.querySelector(".state").textContent = url.endsWith("silence") ? "silenced" : "active";
    }
  },
};

document.addEventListener("DOMContentLoaded", () => {
  for (const node of document.querySelectorAll("time.until")) {
    node.textContent = noema.time(Number(node.dataset.ts));
  }
  for (const button of document.querySelectorAll("button.silence")) {
    button.addEventListener("click", () => senses.act("/api/senses/silence", {
      channel: button.dataset.channel,
      duration: button.closest("td").querySelector("select").value,
    }, button));
  }
  for (const button of document.querySelectorAll("button.start")) {
    button.addEventListener("click", () => senses.act("/api/senses/start",
      {channel: button.dataset.channel}, button));
  }
});
