// The run table: sorted, filtered and paged by the server (/api/run/N/rows); polled so that a run
// still writing results.jsonl shows its new rows. Also the compare page's "only flipped" toggle.
"use strict";

function setupTable(root) {
  const run = root.dataset.run, step = root.dataset.step;
  const form = root.querySelector("#filters"), body = root.querySelector("#rows tbody");
  const state = {sort: "index", desc: false, offset: 0, total: -1, size: 100, key: ""};
  const statusSelect = form.querySelector("select[name=status]");

  function params() {
    const p = new URLSearchParams();
    for (const el of form.elements) if (el.name && el.value !== "") p.set(el.name, el.value);
    p.set("sort", state.sort); if (state.desc) p.set("desc", "1");
    p.set("offset", state.offset); p.set("limit", state.size);
    if (step !== "") p.set("step", step);
    return p;
  }

  function cell(row, key) {
    const td = document.createElement("td");
    let value = row[key];
    if (key === "task_id") {
      const a = document.createElement("a");
      a.href = `/run/${run}/t/${row.index}` + (step !== "" ? `?step=${step}` : "");
      a.textContent = value; td.appendChild(a); return td;
    }
    if (key === "resolved") { td.className = value ? "yes" : "no"; value = value ? "yes" : "no"; }
    if (key === "reward" && typeof value === "number") value = value.toFixed(3);
    td.textContent = value; return td;
  }

  async function load(force) {
    const p = params(), key = p.toString();
    const answer = await fetch(`/api/run/${run}/rows?${key}`);
    if (!answer.ok) { root.querySelector("#count").textContent = "error: " + answer.status; return; }
    const data = await answer.json();
    if (!force && key === state.key && data.total === state.total) return;  // nothing new
    state.key = key; state.total = data.total;
    const keys = [...root.querySelectorAll("#rows th")].map(th => th.dataset.key);
    body.replaceChildren(...data.rows.map(row => {
      const tr = document.createElement("tr");
      tr.dataset.task = row.task_id;
      for (const k of keys) tr.appendChild(cell(row, k));
      return tr;
    }));
    const chosen = statusSelect.value;
    const known = [...statusSelect.options].map(o => o.value);
    for (const s of data.statuses) if (!known.includes(s)) statusSelect.add(new Option(s || "?", s));
    statusSelect.value = chosen;
    root.querySelector("#count").textContent = `${data.matching} of ${data.total} rows`;
    const last = Math.min(data.offset + data.rows.length, data.matching);
    root.querySelector("#pageinfo").textContent = ` ${data.matching ? data.offset + 1 : 0}-${last} `;
    root.dataset.loaded = String(data.total);
    // plots come after the rows: rendering them must not delay the table of a big run
    for (const img of document.querySelectorAll("img[data-src]")) { img.src = img.dataset.src; img.removeAttribute("data-src"); }
  }

  form.addEventListener("input", () => { state.offset = 0; load(true); });
  root.querySelector("#prev").onclick = () => { state.offset = Math.max(0, state.offset - state.size); load(true); };
  root.querySelector("#next").onclick = () => { state.offset += state.size; load(true); };
  for (const th of root.querySelectorAll("#rows th")) {
    th.onclick = () => {
      state.desc = state.sort === th.dataset.key ? !state.desc : false;
      state.sort = th.dataset.key; state.offset = 0;
      for (const other of root.querySelectorAll("#rows th")) other.classList.remove("asc", "desc");
      th.classList.add(state.desc ? "desc" : "asc");
      load(true);
    };
  }
  load(true);
  setInterval(() => load(false), 2000);
}

function setupCompare() {
  const box = document.getElementById("onlyflipped");
  if (!box) return;
  box.onchange = () => {
    for (const tr of document.querySelectorAll("#comparerows tr[data-change]")) {
      const flipped = tr.dataset.change === "fixed" || tr.dataset.change === "broken";
      tr.style.display = box.checked && !flipped ? "none" : "";
    }
  };
}

document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("runtable");
  if (table) setupTable(table);
  setupCompare();
});
