// The files page: restore and undo, answered with the same words as the CLI.
"use strict";

const files = {
  show(text, failed) {
    const box = document.getElementById("outcome");
    box.hidden = false;
    box.className = failed ? "card error" : "card";
    box.textContent = text;
    box.focus();
  },

  async act(url, data, button) {
    button.disabled = true;
    const {status, body} = await noema.post(url, data);
    button.disabled = false;
    if (status === 200) {
      files.show(body.text, false);
      files.refreshSoon();
    } else {
      files.show(body.error || "that did not work", true);
    }
  },

  // The list gains a version; reload it, keeping the outcome line in the address.
  refreshSoon() {
    const reload = document.createElement("a");
    reload.href = "/files";
    reload.textContent = " Show the new version.";
    document.getElementById("outcome").appendChild(reload);
  },
};

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("outcome").tabIndex = -1;
  document.getElementById("undo").addEventListener("click", (event) =>
    files.act("/api/files/undo", {}, event.currentTarget));
  for (const button of document.querySelectorAll("button.restore")) {
    button.addEventListener("click", () => files.act("/api/files/restore", {
      folder: button.dataset.folder, path: button.dataset.path, version: button.dataset.version,
    }, button));
  }
});
