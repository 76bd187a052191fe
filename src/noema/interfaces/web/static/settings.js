// The settings form: each field saved alone, the validator's words shown beside it.
"use strict";

const settings = {
  async save(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const input = form.querySelector("[name=value]");
    const value = input.type === "checkbox" ? (input.checked ? "true" : "false") : input.value;
    const out = form.querySelector(".outcome");
    const button = form.querySelector("button");
    button.disabled = true;
    const {status, body} = await noema.post("/api/settings", {key: form.dataset.key, value});
    button.disabled = false;
    out.className = status === 200 ? "outcome" : "outcome error";
    out.setAttribute("role", status === 200 ? "status" : "alert");
    out.textContent = status === 200 ? body.text : (body.error || "not saved");
  },

  async test(event) {
    const button = event.currentTarget;
    const out = button.closest("details").querySelector(".test-outcome");
    button.disabled = true;
    out.className = "outcome test-outcome";
    out.textContent = "Calling the model…";
    const {status, body} = await noema.post("/api/settings/test", {role: button.dataset.role});
    button.disabled = false;
    out.className = status === 200 ? "outcome test-outcome" : "outcome test-outcome error";
    out.textContent = status === 200 ? body.text : (body.error || "the test failed");
  },
};

async function testRule(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const data = {};
  for (const name of ["channel", "sender", "key", "text"]) data[name] = form.elements[name].value;
  data.authorised = form.elements.authorised.checked;
  const {status, body} = await noema.post("/api/settings/rule", data);
  const out = document.getElementById("rule-outcome");
  out.className = status === 200 ? "outcome" : "outcome error";
  out.textContent = status === 200 ? body.text : (body.error || "the test failed");
}

document.addEventListener("DOMContentLoaded", () => {
  const rule = document.getElementById("rule-test");
  if (rule) rule.addEventListener("submit", testRule);
  for (const form of document.querySelectorAll("form.setting")) {
    form.addEventListener("submit", settings.save);
  }
  for (const button of document.querySelectorAll("button.test-model")) {
    button.addEventListener("click", settings.test);
  }
});
